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
// only), each followed by a paced series. The p99 of one burst of 100 is
// its slowest claim but one, and it moved by up to 2× between runs of the
// same code, floors included; a paced series' p99 as much (the floor's
// own, 40 to 85 ms between runs of a day); the median of several bursts'
// p99s, and of several paced series' p99s, is what the ratios are also
// given of.
func claimBursts(t *testing.T) int {
	return max(1, envInt(t, "BENCH_CLAIM_BURSTS", 3))
}

// benchNodes is how many fake nodes (110 Pods each) a run of n Sandboxes
// gets: one per 100 Sandboxes, at least 10, and room for the claims
// measurement's Pods beside them (the pool of claims, and every claim of
// every burst and the paced ones keeps the Pod of its Sandbox).
func benchNodes(t *testing.T, n, claims int) int {
	pods := n + claims + (claims+pacedClaims(t, claims))*claimBursts(t)
	return max(10, n/100+1, pods/105+1)
}

// Bursts are the bursts of claims one claims measurement served
// (claimBursts): the p99 of each (the first's is the measurement's own),
// their median, what each process used and the API server served
// (apiServerCounts) during each burst after the first (the measurement
// has the first's), and the API server's own work during each burst,
// the first's included.
type Bursts struct {
	P99sMs      []float64 `json:"claim_ready_p99s_ms"`
	MedianP99Ms float64   `json:"claim_ready_median_p99_ms"`
	// PacedP99sMs are every paced series' p99 (the first is the
	// measurement's own), and MedianPacedP99Ms their median.
	PacedP99sMs      []float64            `json:"paced_claim_ready_p99s_ms,omitempty"`
	MedianPacedP99Ms float64              `json:"paced_claim_ready_median_p99_ms,omitempty"`
	MoreCPUSeconds   []map[string]float64 `json:"more_bursts_cpu_seconds,omitempty"`
	MoreAPIRequests  []map[string]int64   `json:"more_bursts_apiserver_requests,omitempty"`
	// APIServerOwn is, for every burst, the work the API server did on
	// its own while it lasted (parseAPIServerMetrics): a burst that met its
	// repair loops or its collections, on either side, shows it here.
	APIServerOwn []map[string]int64 `json:"apiserver_own_work_per_burst,omitempty"`
	// MorePacedTimelines are the timelines of the paced series after the
	// first (whose own is PacedTimeline): where each one's slowest claims
	// went.
	MorePacedTimelines []ClaimTimeline `json:"more_paced_timelines,omitempty"`
	// MoreBurstTimelines are the timelines of the bursts after the first
	// (whose own is the measurement's Timeline): a slow burst's stages,
	// its refill and the collections it met.
	MoreBurstTimelines []ClaimTimeline `json:"more_burst_timelines,omitempty"`
}

// moreBursts serves bursts 2 to r of m claims (named claim<b>-<i>), each
// followed by a paced series of paced claims (paced<b>-<i>), each once
// full reports the pool full again (nil: at once) and the cluster
// settled, and returns them with first and firstPaced, the first burst's
// and paced series' p99, and firstOwn, the API server's own work over the
// first burst. It returns once the pool is full again after the
// last, so that what is measured next (a restart) does not see the
// refill.
func (k *claimClock) moreBursts(t *testing.T, c client.Client, m, paced, r int, first, firstPaced float64, firstOwn map[string]int64, full func() bool) Bursts {
	t.Helper()
	refilled := func() {
		for full != nil && !full() {
			time.Sleep(20 * time.Millisecond)
		}
		settle()
	}
	res := Bursts{P99sMs: []float64{first}, PacedP99sMs: []float64{firstPaced}}
	if firstOwn != nil {
		res.APIServerOwn = append(res.APIServerOwn, firstOwn)
	}
	for b := 2; b <= r; b++ {
		refilled()
		prefix := fmt.Sprintf("claim%d", b)
		s := k.measure(t)
		k.burst(t, c, prefix, m)
		cpu, served := s.end(t, fmt.Sprintf("%s_burst%d", k.ns, b))
		res.MoreCPUSeconds = append(res.MoreCPUSeconds, cpu)
		if served != nil {
			res.MoreAPIRequests = append(res.MoreAPIRequests, served)
			res.APIServerOwn = append(res.APIServerOwn, s.ownDiff)
		}
		lat, _, _ := k.latencies(prefix, m)
		res.P99sMs = append(res.P99sMs, quantile(lat, 0.99))
		res.MoreBurstTimelines = append(res.MoreBurstTimelines, k.timeline(prefix, m))
		if paced > 0 {
			refilled()
			series := fmt.Sprintf("paced%d", b)
			lat = k.paced(t, c, series, paced)
			res.PacedP99sMs = append(res.PacedP99sMs, quantile(lat, 0.99))
			res.MorePacedTimelines = append(res.MorePacedTimelines, k.timeline(series, paced))
		}
	}
	if r > 1 {
		refilled()
	}
	res.MedianP99Ms, res.MedianPacedP99Ms = median(res.P99sMs), median(res.PacedP99sMs)
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

// ratio is a over b, 0 when b is (a figure left out).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
