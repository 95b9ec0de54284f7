package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimBursts is how many bursts of claims each claims measurement serves,
// one after another (BENCH_CLAIM_BURSTS, 3 by default; 1 serves the first
// only). The p99 of one burst of 100 is its slowest claim but one, and it
// moved by up to 2× between runs of the same code, floors included; the
// median of several bursts' p99s is what the ratios are also given of.
func claimBursts(t *testing.T) int {
	return max(1, envInt(t, "BENCH_CLAIM_BURSTS", 3))
}

// benchNodes is how many fake nodes (110 Pods each) a run of n Sandboxes
// gets: one per 100 Sandboxes, at least 10, and room for the claims
// measurement's Pods beside them (the pool of claims, and every claim of
// every burst and the paced ones keeps the Pod of its Sandbox).
func benchNodes(t *testing.T, n, claims int) int {
	pods := n + claims + claims*claimBursts(t) + pacedClaims(t, claims)
	return max(10, n/100+1, pods/105+1)
}

// Bursts are the bursts of claims one claims measurement served
// (claimBursts): the p99 of each (the first's is the measurement's own),
// their median, and what each process used and the API server served
// (apiServerRequests) during each burst after the first (the measurement
// has the first's).
type Bursts struct {
	P99sMs          []float64            `json:"claim_ready_p99s_ms"`
	MedianP99Ms     float64              `json:"claim_ready_median_p99_ms"`
	MoreCPUSeconds  []map[string]float64 `json:"more_bursts_cpu_seconds,omitempty"`
	MoreAPIRequests []map[string]int64   `json:"more_bursts_apiserver_requests,omitempty"`
}

// moreBursts serves bursts 2 to r of m claims (named claim<b>-<i>), each
// once full reports the pool full again (nil: at once) and the cluster
// settled, and returns them with first, the first's p99. It returns once
// the pool is full again after the last, so that what is measured next (a
// restart) does not see the refill.
func (k *claimClock) moreBursts(t *testing.T, c client.Client, m, r int, first float64, full func() bool) Bursts {
	t.Helper()
	refilled := func() {
		for full != nil && !full() {
			time.Sleep(20 * time.Millisecond)
		}
		settle()
	}
	res := Bursts{P99sMs: []float64{first}}
	for b := 2; b <= r; b++ {
		refilled()
		prefix := fmt.Sprintf("claim%d", b)
		s := k.measure(t)
		k.burst(t, c, prefix, m)
		cpu, served := s.end(t, fmt.Sprintf("%s_burst%d", k.ns, b))
		res.MoreCPUSeconds = append(res.MoreCPUSeconds, cpu)
		if served != nil {
			res.MoreAPIRequests = append(res.MoreAPIRequests, served)
		}
		lat, _, _ := k.latencies(prefix, m)
		res.P99sMs = append(res.P99sMs, quantile(lat, 0.99))
	}
	if r > 1 {
		refilled()
	}
	res.MedianP99Ms = median(res.P99sMs)
	return res
}

// median of values (the mean of the middle two for an even count), 0 for
// none.
func median(values []float64) float64 {
	s := slices.Sorted(slices.Values(values))
	switch n := len(s); {
	case n == 0:
		return 0
	case n%2 == 1:
		return s[n/2]
	default:
		return (s[n/2-1] + s[n/2]) / 2
	}
}
