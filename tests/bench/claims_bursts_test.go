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

// moreBursts serves bursts 2 to r of m claims (named claim<b>-<i>), each
// once full reports the pool full again (nil: at once) and the cluster
// settled, and returns each burst's p99 after first, the first's, and what
// each process used during each of them (the first's is not among them).
// It returns once the pool is full again after the last, so that what is
// measured next (a restart) does not see the refill.
func (k *claimClock) moreBursts(t *testing.T, c client.Client, m, r int, first float64, full func() bool) ([]float64, []map[string]float64) {
	t.Helper()
	refilled := func() {
		for full != nil && !full() {
			time.Sleep(20 * time.Millisecond)
		}
		settle()
	}
	p99s := []float64{first}
	var cpus []map[string]float64
	for b := 2; b <= r; b++ {
		refilled()
		prefix := fmt.Sprintf("claim%d", b)
		cpu := cpuByProcess(clusterDirOf)
		k.burst(t, c, prefix, m)
		cpus = append(cpus, cpuDiff(cpuByProcess(clusterDirOf), cpu))
		lat, _, _ := k.latencies(prefix, m)
		p99s = append(p99s, quantile(lat, 0.99))
	}
	if r > 1 {
		refilled()
	}
	return p99s, cpus
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
