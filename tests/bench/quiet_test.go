package bench

import (
	"maps"
	"os"
	"testing"
	"time"
)

// Quiet is how long the bench waited for the cluster to go quiet before a
// measurement that is about a settled cluster. After N Sandboxes start,
// kube-controller-manager works through their Services' endpoints for a
// long time: at N=20000 in one namespace every Service's sync scans the
// namespace's 20,000 Pods, and it used about 0.4 of a core for the whole
// claims phase that followed (27 CPU-s in the paced claims next to our
// Sandboxes, 37 next to the floor's), on a 2-core machine, unevenly. Claims
// "next to N Running Sandboxes" are measured once that is over, on both
// sides, so each side's figure is about the N Sandboxes and not about how
// far the cluster's own catching up had come.
type Quiet struct {
	// WaitedSeconds is from the start of the wait to the end of the
	// first quiet window (or to the limit).
	WaitedSeconds float64 `json:"waited_seconds"`
	// Reached is false when the wait gave up at its limit.
	Reached bool `json:"reached"`
	// LastWindowCores is each process's CPU use over the last window
	// looked at, in cores (the bench's own included, not counted).
	LastWindowCores map[string]float64 `json:"last_window_cores"`
}

// quietWindow is how long a window waitQuiet judges is, and
// quietClusterCores the CPU use, in cores, of the cluster's processes and
// the controller together below which a window is quiet. An idle cluster
// of 201 kwok nodes used less than that here.
const (
	quietWindow       = 10 * time.Second
	quietClusterCores = 0.3
)

// quietLimit is how long waitQuiet waits at most: BENCH_QUIET_MAX (a Go
// duration), 45 minutes unless set.
func quietLimit(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("BENCH_QUIET_MAX")
	if v == "" {
		return 45 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("BENCH_QUIET_MAX=%q: %v", v, err)
	}
	return d
}

// waitQuiet waits until the cluster (clusterDirOf) and the controller use
// less than quietClusterCores over one quietWindow, or until limit, and
// logs each window's figures as it goes.
func waitQuiet(t *testing.T, what string, limit time.Duration) Quiet {
	t.Helper()
	return waitQuietBy(t, what, limit, quietWindow, func() map[string]float64 { return cpuByProcess(clusterDirOf) })
}

// waitQuietBy is waitQuiet with the window and the CPU reading given.
func waitQuietBy(t *testing.T, what string, limit, window time.Duration, cpu func() map[string]float64) Quiet {
	t.Helper()
	start := time.Now()
	prev := cpu()
	for n := 1; ; n++ {
		time.Sleep(window)
		cur := cpu()
		cores := windowCores(prev, cur, window)
		q := Quiet{WaitedSeconds: round2(time.Since(start).Seconds()), LastWindowCores: cores}
		q.Reached = clusterCores(cores) < quietClusterCores
		if q.Reached || time.Since(start) >= limit {
			t.Logf("%s: quiet %v after %.0fs (%.2f cores: %v)", what, q.Reached, q.WaitedSeconds, clusterCores(cores), cores)
			return q
		}
		if n%6 == 0 { // a line a minute
			t.Logf("%s: not quiet after %.0fs (%.2f cores: %v)", what, q.WaitedSeconds, clusterCores(cores), cores)
		}
		prev = cur
	}
}

// windowCores is each process's CPU use between two readings a window
// apart, in cores, rounded to hundredths.
func windowCores(prev, cur map[string]float64, window time.Duration) map[string]float64 {
	out := make(map[string]float64, len(cur))
	for name, s := range cur {
		out[name] = round2((s - prev[name]) / window.Seconds())
	}
	return out
}

// clusterCores sums a window's cores over every process but the bench.
func clusterCores(cores map[string]float64) float64 {
	total := 0.0
	for name, c := range cores {
		if name != "bench" {
			total += c
		}
	}
	return total
}

// TestWaitQuiet: the wait ends at the first window whose cluster CPU (the
// bench's left out) is under quietClusterCores, and gives up at its limit
// with Reached false.
func TestWaitQuiet(t *testing.T) {
	const window = time.Millisecond
	busy := []float64{0.5, 0.5, 0.05} // kube-controller-manager's cores per window
	i := 0
	total := map[string]float64{"kube-controller-manager": 0, "bench": 0}
	q := waitQuietBy(t, "test", time.Minute, window, func() map[string]float64 {
		out := maps.Clone(total)
		if i < len(busy) {
			total["kube-controller-manager"] += busy[i] * window.Seconds()
			total["bench"] += 5 * window.Seconds() // never counted
			i++
		}
		return out
	})
	if !q.Reached || q.LastWindowCores["kube-controller-manager"] != 0.05 {
		t.Fatalf("%+v; want quiet at the window of 0.05 cores", q)
	}
	total["kube-controller-manager"] = 0
	hot := func() map[string]float64 {
		total["kube-controller-manager"] += window.Seconds()
		return maps.Clone(total)
	}
	if q := waitQuietBy(t, "test", 5*window, window, hot); q.Reached {
		t.Fatalf("%+v; want the limit, not quiet, with a core busy throughout", q)
	}
}
