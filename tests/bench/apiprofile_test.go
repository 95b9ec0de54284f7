package bench

import (
	"context"
	"fmt"
	"os"
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

// apiServerRequests reads the requests the API server cfg reaches has
// served so far, from every client (its apiserver_request_total), summed
// by verb and resource ("LIST pods", "PATCH sandboxes/status"); nil when
// its /metrics cannot be read. A burst's difference tells what the API
// server spent its CPU on, the controller's requests and everyone else's.
func apiServerRequests(cfg *rest.Config) map[string]int64 {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := httpGetWith(ctx, hc, cfg.Host+"/metrics")
	if err != nil {
		return nil
	}
	samples := map[string]int64{}
	for line := range strings.Lines(string(body)) {
		addSample(samples, "apiserver_request_total", strings.TrimSpace(line))
	}
	out := map[string]int64{}
	for labels, v := range samples {
		key := labelValue(labels, "verb") + " " + labelValue(labels, "resource")
		if sub := labelValue(labels, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out
}
