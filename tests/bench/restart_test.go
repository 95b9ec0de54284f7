package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Restart is the controller stopped and started again with nothing
// changed (N Running Sandboxes): how long until it is ready and until it
// has looked at every Sandbox once, and what it sent meanwhile. Nothing
// but reads (its lists and watches) is the goal: a restart that changes
// nothing writes nothing.
type Restart struct {
	// ReadySeconds is from the new process's start until /readyz answers.
	ReadySeconds float64 `json:"ready_seconds"`
	// ReconciledSeconds is from its start until its Sandbox controller
	// has finished N reconciles (controller_runtime_reconcile_total).
	ReconciledSeconds float64 `json:"all_reconciled_seconds"`
	// ByVerb is what it sent from its start until 3 s after that (settle),
	// and Writes the requests among them that are not GET, LIST or WATCH.
	ByVerb map[string]int64 `json:"controller_requests_by_verb"`
	Writes int64            `json:"controller_writes"`
	// CPUSeconds is its CPU time over the same span; RSSMB its resident
	// memory at the end of it.
	CPUSeconds float64 `json:"controller_cpu_seconds"`
	RSSMB      float64 `json:"controller_rss_mb"`
	// StoppedRSSMB is the first controller's resident memory just before
	// it was stopped, with the same Sandboxes.
	StoppedRSSMB float64 `json:"stopped_controller_rss_mb"`
	// Profile is its CPU profile from its pprof server's first moment
	// until the end of that span (restart.pprof), and HeapProfile its heap
	// then (restart.heap.pprof, after a collection).
	Profile     string `json:"cpu_profile,omitempty"`
	HeapProfile string `json:"heap_profile,omitempty"`
	// APIRequests is what the API server served, from every client, from
	// the first controller's stop until the second had reconciled every
	// Sandbox; with BENCH_APISERVER_PROFILE=1 its CPU profile over that
	// span is apiserver-restart.pprof.
	APIRequests map[string]int64 `json:"apiserver_requests,omitempty"`
	// Reconciles is the new controller's Sandbox reconciles (all results)
	// by 3 s after it had made N (settle): N when each Sandbox was looked
	// at once.
	Reconciles int64 `json:"sandbox_reconciles"`
	// CPUByProcess is the CPU each process used over that span: the new
	// controller's, the cluster's and the bench's.
	CPUByProcess map[string]float64 `json:"cpu_seconds_by_process,omitempty"`
}

// RestartResult is the JSON document TestBenchRestart prints.
type RestartResult struct {
	N     int `json:"n"`
	Nodes int `json:"nodes"`
	// Namespaces is how many namespaces the N Sandboxes are spread over
	// (BENCH_NAMESPACES, 1): kube-controller-manager's Endpoints and
	// EndpointSlice controllers match each Pod against every Service of
	// its namespace, and each Service against every Pod.
	Namespaces int `json:"namespaces"`
	// Cold is the N Sandboxes created, until all Ready (their requests
	// per Sandbox are the same as TestBench's cold_create).
	Cold Phase `json:"cold_create"`
	// Idle is BENCH_IDLE_SECONDS with nothing changing.
	Idle    Phase   `json:"idle"`
	Restart Restart `json:"restart"`
}

// TestBenchRestart measures a controller restart with nothing changed: N
// Running Sandboxes (BENCH_N, 500) made by the controller, an idle spell,
// then the controller stopped and started again (Restart). It runs only
// with AGENT_SANDBOX_BENCH=1 (make bench); BENCH_RESTART_OUT is a file for
// the JSON. It has its own cluster so that TestBench's figures, memory
// after the run among them, are one process's throughout.
func TestBenchRestart(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	n := envInt(t, "BENCH_N", 500)
	res := RestartResult{N: n, Nodes: max(10, n/100+1), Namespaces: benchNamespaces(t, n)}
	local, c := startBenchCluster(t, "bench-restart", res.Nodes)
	watched := newWatch(t, local.Config, "", &sandboxv1beta1.Sandbox{})
	startWatch(t, watched)
	ctrl := startController(t, local.Kubeconfig)
	defer func() { ctrl.stop(t) }() // the one running then
	namespaces := mkNamespaces(t, c, "restart", res.Namespaces)

	pr := ctrl.begin(t, "restart_cold")
	cpu := cpuByProcess(clusterDirOf)
	res.Cold.Seconds = coldWaveIn(t, c, watched, namespaces, n)
	res.Cold.CPUSeconds = cpuDiff(cpuByProcess(clusterDirOf), cpu)
	settle()
	pr.end(t, &res.Cold, n)

	pr = ctrl.begin(t, "restart_idle")
	time.Sleep(idleSeconds(t))
	res.Idle.Seconds = idleSeconds(t).Seconds()
	pr.end(t, &res.Idle, n)

	ctrl, res.Restart = benchRestart(t, ctrl, local.Config, local.Kubeconfig, n)
	report(t, res, "BENCH_RESTART_OUT")
}

// benchRestart stops ctrl, starts the controller again and measures it
// (Restart) until it has reconciled n Sandboxes. It returns the new
// controller, which the caller stops.
func benchRestart(t *testing.T, ctrl *controller, cfg *rest.Config, kubeconfig string, n int) (*controller, Restart) {
	t.Helper()
	var r Restart
	r.StoppedRSSMB, _ = ctrl.rssMB()
	ctrl.stop(t)
	s := beginStretch(t, cfg)
	s.cpu["sandbox-controller"] = 0 // the new process's counts from its start
	var prof *profiler
	next := startControllerThen(t, kubeconfig, func(c *controller) { prof = startProfileOnceUp(c.pprof) })
	r.ReadySeconds = round2(next.ready.Sub(next.started).Seconds())
	deadline := time.Now().Add(10 * time.Minute)
	for next.reconciles(t, "sandbox") < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted controller reconciled %d of %d Sandboxes in 10 minutes", next.reconciles(t, "sandbox"), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.ReconciledSeconds = round2(time.Since(next.started).Seconds())
	r.CPUByProcess, r.APIRequests = s.end(t, "restart")
	settle()
	r.Reconciles = next.reconciles(t, "sandbox")
	r.ByVerb = next.requestsByVerb(t)
	for verb, v := range r.ByVerb {
		switch verb {
		case "GET", "LIST", "WATCH":
		default:
			r.Writes += v
		}
	}
	r.CPUSeconds = round2(procCPU(next.cmd.Process.Pid))
	r.RSSMB, _ = next.rssMB()
	var err error
	if r.Profile, err = prof.finish("restart"); err != nil {
		t.Fatal(err)
	}
	if r.HeapProfile, _, err = saveHeap(next.pprof, "restart"); err != nil {
		t.Fatal(err)
	}
	return next, r
}

// reconciles sums controller_runtime_reconcile_total of one controller
// (every result).
func (c *controller) reconciles(t *testing.T, name string) int64 {
	var sum int64
	for labels, v := range c.series(t, "controller_runtime_reconcile_total") {
		if strings.Contains(labels, `controller="`+name+`"`) {
			sum += v
		}
	}
	return sum
}

// idleSeconds is how long the idle phase lasts: BENCH_IDLE_SECONDS, or 10.
func idleSeconds(t *testing.T) time.Duration {
	s := 10
	if v := os.Getenv("BENCH_IDLE_SECONDS"); v != "" {
		var err error
		if s, err = strconv.Atoi(v); err != nil || s <= 0 {
			t.Fatalf("BENCH_IDLE_SECONDS=%q: want a positive integer", v)
		}
	}
	return time.Duration(s) * time.Second
}

// coldWaveIn creates n Sandboxes at once (benchSandbox), spread over
// namespaces in turn, and returns the seconds until the watch shows every
// one Ready.
func coldWaveIn(t *testing.T, c client.Client, watched cache.Cache, namespaces []string, n int) float64 {
	t.Helper()
	ready := watchReady(t, watched, namespaces, n)
	start := time.Now()
	parallel(n, func(i int) error {
		return c.Create(context.Background(), benchSandbox(namespaces[i%len(namespaces)], i))
	}, t)
	ready.wait()
	return round2(time.Since(start).Seconds())
}
