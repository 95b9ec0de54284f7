package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"
)

// apiServerChunk is the length of each chunk of an API server profile: a
// burst of claims lasts 1-3 s, and what follows it (the pool's refill)
// is not the burst's.
const apiServerChunk = 1 // seconds

// startAPIServerProfile starts a CPU profile of the API server cfg
// reaches (its /debug/pprof, as cfg's user) when BENCH_APISERVER_PROFILE=1,
// to tell where the API server's time goes in a burst of claims, the
// controller's against its floor's; nil otherwise.
func startAPIServerProfile(t *testing.T, cfg *rest.Config) *profiler {
	t.Helper()
	if os.Getenv("BENCH_APISERVER_PROFILE") != "1" {
		return nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cfg.Host, apiServerChunk)
	return startProfileOf(func() (*profile.Profile, error) {
		ctx, cancel := context.WithTimeout(context.Background(), apiServerChunk*time.Second+30*time.Second)
		defer cancel()
		body, err := httpGetWith(ctx, hc, url)
		if err != nil {
			return nil, err
		}
		return profile.ParseData(body)
	})
}

// finishAPIServerProfile writes p (none when nil) to
// .work/bench-profiles/apiserver-<phase>.pprof.
func finishAPIServerProfile(t *testing.T, p *profiler, phase string) {
	t.Helper()
	if p == nil {
		return
	}
	path, err := p.finish("apiserver-" + phase)
	if err != nil {
		t.Logf("API server profile of %s: %v", phase, err)
		return
	}
	t.Logf("API server profile of %s: %s", phase, path)
}

// apiServerCounts reads the API server cfg reaches's /metrics once and
// returns what parseAPIServerMetrics finds there; nil when it cannot be
// read.
func apiServerCounts(cfg *rest.Config) (served, etcd, own map[string]int64) {
	body, err := apiServerGet(cfg, "/metrics")
	if err != nil {
		return nil, nil, nil
	}
	return parseAPIServerMetrics(string(body))
}

// parseAPIServerMetrics reads, in one pass over kube-apiserver's /metrics:
//
//   - served: the requests served so far, from every client
//     (apiserver_request_total), summed by verb and resource ("LIST pods",
//     "PATCH sandboxes/status");
//   - etcd: the requests it has sent etcd so far (etcd_requests_total), by
//     operation and resource ("update sandboxes", "get pods"); a write whose
//     optimistic put met a newer revision is tried again, and each try
//     counts, so more updates than writes served are retries;
//   - own: the work it does on its own whoever its clients are. Its
//     collections ("gc_cycles", go_gc_duration_seconds_count, and the CPU
//     they took, "gc_cpu_ms" from go_cpu_classes_gc_total_cpu_seconds_total:
//     a cycle counts when it ends, its CPU as it goes). The items its
//     ClusterIP repair loop queued ("repair_queued services",
//     "repair_queued ipaddresses": workqueue_adds_total of its queues of
//     those names): every three minutes (no flag sets it) that loop goes
//     through every Service and IPAddress from its informers, which costs
//     CPU but no request; its NodePort sibling lists every Service then,
//     which shows among the served requests as "LIST services". The watch
//     cache's consistency checks ("consistency_checks <resource>",
//     apiserver_storage_consistency_checks_total, counted when a check
//     ends): every 5 to 7.5 minutes per resource (DetectCacheInconsistency,
//     on by default since 1.34), each lists the resource from etcd and
//     digests it against the cache.
//
// A burst's difference tells what the API server spent its CPU on: the
// controller's requests, everyone else's, and its own work, which with
// one Service per Sandbox costs CPU in proportion to N and meets a burst
// of claims by chance, on either side.
func parseAPIServerMetrics(metrics string) (served, etcd, own map[string]int64) {
	requests, toEtcd := map[string]int64{}, map[string]int64{}
	queued, checks := map[string]int64{}, map[string]int64{}
	own = map[string]int64{}
	for line := range strings.Lines(metrics) {
		line = strings.TrimSpace(line)
		addSample(requests, "apiserver_request_total", line)
		addSample(toEtcd, "etcd_requests_total", line)
		addSample(queued, "workqueue_adds_total", line)
		addSample(checks, "apiserver_storage_consistency_checks_total", line)
		name, value, _ := strings.Cut(line, " ")
		key, scale := "", 1.0
		switch name {
		case "go_gc_duration_seconds_count":
			key = "gc_cycles"
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			key, scale = "gc_cpu_ms", 1000
		}
		if v, err := strconv.ParseFloat(value, 64); key != "" && err == nil {
			own[key] = int64(v * scale)
		}
	}
	served, etcd = map[string]int64{}, map[string]int64{}
	for labels, v := range requests {
		key := labelValue(labels, "verb") + " " + labelValue(labels, "resource")
		if sub := labelValue(labels, "subresource"); sub != "" {
			key += "/" + sub
		}
		served[key] += v
	}
	for labels, v := range toEtcd {
		etcd[labelValue(labels, "operation")+" "+labelValue(labels, "resource")] += v
	}
	for labels, v := range checks {
		own["consistency_checks "+labelValue(labels, "resource")] += v
	}
	for labels, v := range queued {
		if name := labelValue(labels, "name"); name == "services" || name == "ipaddresses" {
			own["repair_queued "+name] += v
		}
	}
	return served, etcd, own
}

// apiServerAllocs reads the API server's allocation profile (its
// /debug/pprof/allocs: every allocation sampled since it started) when
// BENCH_APISERVER_PROFILE=1; nil otherwise, or when it cannot be read. It
// has the API server collect first (gc=1): a heap profile counts the
// allocations made up to a collection or two before it (runtime.MemProfile),
// and over a paced series the API server collects one to four times on its
// own, so without it two readings would bound a stretch of their own.
func apiServerAllocs(cfg *rest.Config) *profile.Profile {
	if os.Getenv("BENCH_APISERVER_PROFILE") != "1" || cfg == nil {
		return nil
	}
	body, err := apiServerGet(cfg, "/debug/pprof/allocs?gc=1")
	if err != nil {
		return nil
	}
	p, err := profile.ParseData(body)
	if err != nil {
		return nil
	}
	return p
}

// saveAllocsSince writes what the API server allocated since before (read
// by apiServerAllocs) to .work/bench-profiles/apiserver-<phase>.allocs.pprof,
// as `go tool pprof -base` would show it.
func saveAllocsSince(t *testing.T, cfg *rest.Config, before *profile.Profile, phase string) {
	t.Helper()
	after := apiServerAllocs(cfg)
	if before == nil || after == nil {
		return
	}
	before.Scale(-1)
	delta, err := profile.Merge([]*profile.Profile{after, before})
	if err != nil {
		t.Logf("API server allocations over %s: %v", phase, err)
		return
	}
	var body bytes.Buffer
	err = delta.Write(&body)
	var rel string
	if err == nil {
		rel, err = saveProfileFile("apiserver-"+phase+".allocs.pprof", body.Bytes())
	}
	if err != nil {
		t.Logf("API server allocations over %s: %v", phase, err)
		return
	}
	t.Logf("API server allocations over %s: %s", phase, rel)
}

// apiServerGet returns the body of a GET of path from the API server cfg
// reaches, as cfg's user, within 30 seconds.
func apiServerGet(cfg *rest.Config, path string) ([]byte, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return httpGetWith(ctx, hc, cfg.Host+path)
}
