package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/pprof/profile"

	"github.com/agentsandbox/reconciler/tests"
)

// saveHeap fetches the controller's heap profile (after a GC: gc=1) from
// its pprof server at addr, saves it as .work/bench-profiles/<phase>.heap.pprof
// and returns that repo-relative path and the bytes in use it shows, MiB.
func saveHeap(addr, phase string) (string, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	prof, err := profile.ParseData(body)
	if err != nil {
		return "", 0, fmt.Errorf("heap profile of %s: %w", phase, err)
	}
	rel := filepath.Join(profileDir, phase+".heap.pprof")
	path := filepath.Join(tests.RepoRoot(), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
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
