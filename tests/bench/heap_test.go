package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// saveHeap fetches the controller's heap profile (after a GC: gc=1) from
// its pprof server at addr, saves it as .work/bench-profiles/<phase>.heap.pprof
// and returns that repo-relative path and the bytes in use it shows, MiB.
func saveHeap(addr, phase string) (string, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := httpGet(ctx, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr))
	if err != nil {
		return "", 0, err
	}
	prof, err := profile.ParseData(body)
	if err != nil {
		return "", 0, fmt.Errorf("heap profile of %s: %w", phase, err)
	}
	rel, err := saveProfileFile(phase+".heap.pprof", body)
	if err != nil {
		return "", 0, err
	}
	return rel, inuseMB(prof), nil
}

// inuseMB sums the inuse_space samples of a heap profile, MiB.
func inuseMB(p *profile.Profile) float64 {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return 0
	}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[idx]
	}
	return round2(float64(total) / (1 << 20))
}

// goMemMB scrapes the controller's Go runtime memory gauges (MiB): what
// its RSS is made of besides the live heap. heap_inuse is live and not yet
// collected; heap_idle minus heap_released is kept for reuse; sys is all
// the runtime obtained from the OS (RSS adds the binary's touched pages).
func (c *controller) goMemMB(t *testing.T) map[string]float64 {
	t.Helper()
	want := map[string]string{
		"go_memstats_heap_inuse_bytes": "heap_inuse", "go_memstats_heap_idle_bytes": "heap_idle",
		"go_memstats_heap_released_bytes": "heap_released", "go_memstats_stack_sys_bytes": "stack_sys",
		"go_memstats_sys_bytes": "sys", "go_memstats_next_gc_bytes": "next_gc",
	}
	out := map[string]float64{}
	c.scrape(t, func(line string) {
		name, value, ok := strings.Cut(line, " ")
		if key, known := want[name]; ok && known {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[key] = round2(v / (1 << 20))
			}
		}
	})
	return out
}

// rssSplitMB reads the controller's resident memory by kind, MiB: anon
// (RssAnon: the Go heap, stacks and the runtime's own structures) and file
// (RssFile: the pages of the binary it touched, which the kernel maps in
// runs around each one touched).
func (c *controller) rssSplitMB() map[string]float64 {
	status := c.procStatusMB()
	if status == nil {
		return nil
	}
	return map[string]float64{"anon": round2(status["RssAnon"]), "file": round2(status["RssFile"])}
}
