package bench

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ScaleResult is the JSON document TestBenchScale prints: the figures a
// large N is measured for, each next to its floor from the same run.
type ScaleResult struct {
	N     int `json:"n"`
	Nodes int `json:"nodes"`
	// Namespaces is how many namespaces the N Sandboxes are spread over,
	// on both sides (BENCH_NAMESPACES, 1; see RestartResult.Namespaces).
	Namespaces int `json:"namespaces"`
	// Floor is measureFloor's cold create (no suspend and resume), on a
	// cluster of its own, and Cold the controller's, with ratio_to_floor.
	Floor Baseline `json:"floor"`
	Cold  Phase    `json:"cold_create"`
	// Idle is BENCH_IDLE_SECONDS with the N Sandboxes Running.
	Idle Phase `json:"idle"`
	// WarmClaims are the claims next to the N Running Sandboxes, with the
	// claims floor next to the floor's own N (floor_next_to_n) and on the
	// floor's cluster before its N were made (floor).
	WarmClaims Claims `json:"warm_claims"`
	// Memory is the controller's, at start and with the N Running.
	Memory ScaleMemory `json:"memory"`
	// Restart is the controller restarted with nothing changed.
	Restart Restart `json:"restart"`
	// QuietBeforeClaims is the wait for a quiet cluster before the claims
	// next to the N, on the floor's cluster ("floor_next_to_n") and on
	// the controller's ("controller").
	QuietBeforeClaims map[string]Quiet `json:"quiet_before_claims"`
	// Seconds is the whole run's wall time, cluster start included.
	Seconds float64 `json:"seconds"`
}

// ScaleMemory is the controller's memory at start (synced, no Sandbox) and
// with the N Sandboxes Running (resident memory settled before the idle
// phase, live heap after it), and what each Sandbox adds: resident memory
// (VmRSS) and live heap (after a GC).
type ScaleMemory struct {
	StartRSSMB          float64            `json:"start_rss_mb"`
	StartHeapMB         float64            `json:"start_heap_inuse_mb"`
	RunningRSSMB        float64            `json:"running_rss_mb"`
	RunningRSSSplitMB   map[string]float64 `json:"running_rss_split_mb"`
	RunningHeapMB       float64            `json:"running_heap_inuse_mb"`
	PeakRSSMB           float64            `json:"peak_rss_mb"`
	RSSPerSandboxKiB    float64            `json:"rss_per_sandbox_kib"`
	HeapPerSandboxKiB   float64            `json:"heap_per_sandbox_kib"`
	RunningGoMemStatsMB map[string]float64 `json:"running_go_memstats_mb"`
}

// TestBenchScale measures what a large N is about (BENCH_N, 500): cold
// create against the floor's cold create, an idle spell, claims next to
// the N Running Sandboxes against claims floors (each once its cluster is
// quiet, BENCH_QUIET_MAX at most; see Quiet), the controller's memory
// per Sandbox, and a restart with nothing changed, the N spread over
// BENCH_NAMESPACES namespaces (1) on both sides. It leaves out raw,
// suspend, resume and delete, which TestBench measures. The floor and the
// controller each get a fresh cluster of the same size, one after the
// other: deleting the floor's N Sandboxes, their Pods and Services before
// the controller starts took over an hour at N=20000, longer than the
// floor itself, and a new cluster takes a minute. It runs with
// AGENT_SANDBOX_BENCH=1 and only when -run names it
// (BENCH_RUN=TestBenchScale make bench); BENCH_SCALE_OUT is a file for the
// JSON.
func TestBenchScale(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "TestBenchScale") {
		t.Skip("TestBenchScale runs only when named (BENCH_RUN=TestBenchScale)")
	}
	began := time.Now()
	n := envInt(t, "BENCH_N", 500)
	claims := envInt(t, "BENCH_CLAIMS", 100)
	res := ScaleResult{N: n, Nodes: benchNodes(t, n, claims), Namespaces: benchNamespaces(t, n),
		QuietBeforeClaims: map[string]Quiet{}}
	var claimsFloor, besideFloor ClaimsFloor
	if !t.Run("floor", func(t *testing.T) {
		local, c := startBenchCluster(t, "bench-scale-floor", res.Nodes)
		watched := newWatch(t, local.Config, "", &corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{})
		startWatch(t, watched)
		// A first claims floor, not counted, warms the new cluster up.
		measureClaimsFloor(t, "claims_floor_warmup", local.Config, c, watched, claims, pacedClaims(t, claims))
		claimsFloor = measureClaimsFloor(t, "claims_floor", local.Config, c, watched, claims, pacedClaims(t, claims))
		res.Floor, _, _ = measureFloor(t, local.Config, c, watched, n, floorOptions{keep: true, namespaces: res.Namespaces, beside: func() {
			res.QuietBeforeClaims["floor_next_to_n"] = waitQuiet(t, "floor's claims next to n", quietLimit(t))
			besideFloor = measureClaimsFloor(t, "claims_floor_next_to_n", local.Config, c, watched, claims, pacedClaims(t, claims))
		}})
		t.Logf("floor done after %.0fs: %.2fs; claims floor p99 %.0f ms, next to %d %.0f ms", time.Since(began).Seconds(),
			res.Floor.Seconds, claimsFloor.P99Ms, n, besideFloor.P99Ms)
	}) {
		return
	}
	t.Run("controller", func(t *testing.T) { benchScaleController(t, &res, claims) })
	res.WarmClaims.withFloor(claimsFloor)
	res.WarmClaims.besideFloor(besideFloor)
	res.Seconds = round2(time.Since(began).Seconds())
	report(t, res, "BENCH_SCALE_OUT")
}

// benchScaleController measures the controller's part of TestBenchScale
// on a cluster of its own, into res.
func benchScaleController(t *testing.T, res *ScaleResult, claims int) {
	n := res.N
	local, c := startBenchCluster(t, "bench-scale", res.Nodes)
	watched := newWatch(t, local.Config, "", &corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{})
	startWatch(t, watched)
	ctrl := startController(t, local.Kubeconfig)
	defer func() { ctrl.stop(t) }() // the one running then
	settle()
	time.Sleep(memorySettle)
	res.Memory.StartRSSMB, _ = ctrl.rssMB() // before the heap profile, as below
	var err error
	if _, res.Memory.StartHeapMB, err = saveHeap(ctrl.pprof, "scale_start"); err != nil {
		t.Fatal(err)
	}

	namespaces := mkNamespaces(t, c, "scale", res.Namespaces)
	pr := ctrl.begin(t, "scale_cold")
	cpu := cpuByProcess(clusterDirOf)
	res.Cold.Seconds = coldWaveIn(t, c, watched, namespaces, n)
	res.Cold.RatioToFloor = res.Cold.Seconds / res.Floor.Seconds
	res.Cold.CPUSeconds = cpuDiff(cpuByProcess(clusterDirOf), cpu)
	settle()
	pr.end(t, &res.Cold, n)
	t.Logf("cold done: %.2fs, %.2f x floor", res.Cold.Seconds, res.Cold.RatioToFloor)

	// Resident memory once settled: the controller gives its free heap
	// back after 10 s of quiet (--release-free-heap), which the idle
	// phase's own CPU profile and metrics reads would put off. It is read
	// before that phase and its heap profile, which maps in the code and
	// function tables encoding it.
	time.Sleep(memorySettle)
	m := &res.Memory
	m.RunningRSSMB, m.PeakRSSMB = ctrl.rssMB()
	m.RunningRSSSplitMB = ctrl.rssSplitMB()
	pr = ctrl.begin(t, "scale_idle")
	time.Sleep(idleSeconds(t))
	res.Idle.Seconds = idleSeconds(t).Seconds()
	pr.end(t, &res.Idle, n)
	m.RunningHeapMB, m.RunningGoMemStatsMB = res.Idle.HeapInuseMB, res.Idle.GoMemMB
	m.RSSPerSandboxKiB = round2((m.RunningRSSMB - m.StartRSSMB) * 1024 / float64(n))
	m.HeapPerSandboxKiB = round2((m.RunningHeapMB - m.StartHeapMB) * 1024 / float64(n))

	res.QuietBeforeClaims["controller"] = waitQuiet(t, "claims next to n", quietLimit(t))
	res.WarmClaims = benchClaims(t, local.Config, c, watched, ctrl, mkNamespace(t, c, "claims"), claims)
	t.Logf("claims done: p99 %.0f ms (bursts %v)", res.WarmClaims.P99Ms, res.WarmClaims.P99sMs)

	// The claims' Sandboxes and their pool's are there too; the restart
	// is timed until n reconciles, as TestBenchRestart's.
	ctrl, res.Restart = benchRestart(t, ctrl, local.Config, local.Kubeconfig, n)
}
