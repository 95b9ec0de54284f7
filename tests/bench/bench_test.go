package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// Result is the JSON document the benchmark prints.
type Result struct {
	N     int `json:"n"`
	Nodes int `json:"nodes"`
	// Floor is the least work any controller of this API causes, done by
	// one client before the controller starts: N Sandboxes created, each
	// one's Service and Pod applied as the controller renders them, and one
	// status write when its Pod is Ready (see measureFloor). Every phase's
	// ratio_to_floor is to its seconds.
	Floor Baseline `json:"floor"`
	// FloorSuspend and FloorResume are the floor's Sandboxes suspended,
	// then resumed, with the least any controller does (floorCycle): the
	// lower bounds of suspend_all and resume_all (ratio_to_own_floor).
	// Their requests are the floor client's only, not the users' patches.
	FloorSuspend Baseline `json:"floor_suspend"`
	FloorResume  Baseline `json:"floor_resume"`
	// FloorAfter is the floor's cold create measured again at the end of
	// the run, the controller stopped and its namespaces gone
	// (BENCH_FLOORS_AFTER=0 leaves it out): a cluster that has served a
	// run is not the fresh one the first floor met, and
	// ColdRatioToFloorsAround is cold create's seconds over the mean of
	// the two floors'. Its Sandboxes are left for the cluster's end.
	FloorAfter              *Baseline `json:"floor_after,omitempty"`
	ColdRatioToFloorsAround float64   `json:"cold_create_ratio_to_floors_around,omitempty"`
	// Raw is one client creating N Pods + N headless Services directly (no
	// Sandbox, no status), until every Pod is Ready.
	Raw Baseline `json:"raw_pods_and_services"`
	// Cold is N Sandboxes (with a Service) created at once, until all Ready.
	Cold Phase `json:"cold_create"`
	// Touch is a metadata-only change to every Sandbox.
	Touch Phase `json:"metadata_touch"`
	// Suspend and Resume are every Sandbox suspended (until its Pod is
	// gone), then resumed (until Ready again); both report ratio_to_cold.
	Suspend Phase `json:"suspend_all"`
	Resume  Phase `json:"resume_all"`
	// Idle is BENCH_IDLE_SECONDS (10) with nothing changing, every
	// Sandbox Running: the controller should send nothing.
	Idle   Phase `json:"idle"`
	Delete Phase `json:"delete_all"`
	// ControllerRequestsByVerb is every request the controller sent during
	// the run, from its rest_client_requests_total, with the watches it
	// opened taken out of GET as WATCH (requestsByVerb).
	ControllerRequestsByVerb map[string]int64 `json:"controller_requests_by_verb"`
	// ControllerPeakRSSMB is the controller process's peak resident memory
	// over the whole run (VmHWM), in MiB.
	ControllerPeakRSSMB float64 `json:"controller_peak_rss_mb"`
	// ControllerStartRSSMB and ControllerStartHeapMB are its resident
	// memory and live heap (after a GC) once started and synced, before
	// the first Sandbox: what one replica costs with nothing to manage.
	ControllerStartRSSMB   float64            `json:"controller_start_rss_mb"`
	ControllerStartHeapMB  float64            `json:"controller_start_heap_inuse_mb"`
	ControllerStartGoMemMB map[string]float64 `json:"controller_start_go_memstats_mb"`
	// ControllerStartRSSSplitMB is that resident memory by kind (see
	// rssSplitMB): anon (the heap, stacks, runtime) and file (the binary's
	// pages it touched).
	ControllerStartRSSSplitMB map[string]float64 `json:"controller_start_rss_split_mb"`
	// ControllerEndRSSMB, ControllerEndRSSSplitMB, ControllerEndHeapMB and
	// ControllerEndGoMemMB are the same once the run is over (every
	// Sandbox deleted, the claims and their warm pool left) and settled:
	// what a replica keeps after a busy hour. Both are read after
	// memorySettle, and before the heap profile and metrics are served.
	ControllerEndRSSMB      float64            `json:"controller_end_rss_mb"`
	ControllerEndRSSSplitMB map[string]float64 `json:"controller_end_rss_split_mb"`
	ControllerEndHeapMB     float64            `json:"controller_end_heap_inuse_mb"`
	ControllerEndGoMemMB    map[string]float64 `json:"controller_end_go_memstats_mb"`
	// Applies are the controller's agent_sandbox_apply_total by kind/action.
	Applies map[string]int64 `json:"controller_apply_total"`
	// WarmClaims is the warm pool and claims scenario.
	WarmClaims Claims `json:"warm_claims"`
}

// Phase is one measured step of the controller.
type Phase struct {
	// Seconds is from the phase's first request until the bench's watch
	// sees it done.
	Seconds float64 `json:"seconds"`
	// RatioToFloor is Seconds over the floor's (the Sandbox phases; not the
	// claim phase, whose count differs from N).
	RatioToFloor float64 `json:"ratio_to_floor,omitempty"`
	// RatioToCold is Seconds over cold create's (suspend and resume), and
	// RatioToOwnFloor over floor_suspend's or floor_resume's.
	RatioToCold     float64 `json:"ratio_to_cold,omitempty"`
	RatioToOwnFloor float64 `json:"ratio_to_own_floor,omitempty"`
	// Requests is what the controller sent from the phase's start to 3 s
	// after it was done (settle, so that its tail counts).
	Requests           int64   `json:"controller_requests"`
	RequestsPerSandbox float64 `json:"controller_requests_per_sandbox"`
	// WritesPerSandbox counts the writes among them (writes): an
	// informer opens its watch again every few minutes whatever a phase
	// does, so a long phase's requests hold a few reads no Sandbox asked
	// for. Goal 0's figure (6 per suspend and resume) counts writes.
	WritesPerSandbox float64          `json:"controller_writes_per_sandbox"`
	ByVerb           map[string]int64 `json:"controller_requests_by_verb,omitempty"`
	// Applies is the controller's agent_sandbox_apply_total over the same
	// span, by kind (SandboxStatus: status writes) and action: which
	// objects the requests were for.
	Applies map[string]int64 `json:"controller_apply_total,omitempty"`
	// Responses is its rest_client_requests_total over the same span by
	// every label (code, host, method): conflicts (409) show here.
	Responses map[string]int64 `json:"controller_requests_by_code,omitempty"`
	// Reconciles is its controller_runtime_reconcile_total over the same
	// span, by controller and result: what the allocation and CPU of the
	// phase were spent on.
	Reconciles map[string]int64 `json:"controller_reconciles,omitempty"`
	// ControllerCPUSeconds is the controller process's CPU time (user +
	// system, /proc/<pid>/stat) over the same span as Requests.
	ControllerCPUSeconds float64 `json:"controller_cpu_seconds"`
	// APIServerRequests is what the API server served until the phase was
	// done, from every client, by verb and resource, and EtcdRequests what
	// it sent etcd (apiServerCounts): what the cluster did for it, against
	// the floor's.
	APIServerRequests map[string]int64 `json:"apiserver_requests,omitempty"`
	EtcdRequests      map[string]int64 `json:"etcd_requests,omitempty"`
	// ControllerRSSMB is its resident memory at the end of the phase
	// (VmRSS), ControllerPeakRSSMB its peak since it started (VmHWM), MiB.
	ControllerRSSMB     float64 `json:"controller_rss_mb"`
	ControllerPeakRSSMB float64 `json:"controller_peak_rss_mb"`
	// Profile is the controller's CPU profile over the same span as
	// Requests (consecutive 5 s profiles merged, see profileChunk: the last
	// runs up to 5 s past it), relative to the repository root.
	Profile string `json:"cpu_profile,omitempty"`
	// HeapProfile is the controller's heap profile at the end of the phase
	// (after a GC), and HeapInuseMB the bytes in use it shows, MiB: what
	// the controller keeps alive, where RSS adds garbage not yet collected
	// and the runtime's own overhead.
	HeapProfile string  `json:"heap_profile,omitempty"`
	HeapInuseMB float64 `json:"controller_heap_inuse_mb,omitempty"`
	// GoMemMB are the controller's Go runtime memory gauges at the end of
	// the phase (see goMemMB).
	GoMemMB map[string]float64 `json:"controller_go_memstats_mb,omitempty"`
	// GCCycles are the collector cycles the controller ran over the phase
	// (settle included), and AllocatedMB the heap it allocated, MiB: what
	// drives them, and the CPU they take from the API server beside it.
	GCCycles    int64   `json:"controller_gc_cycles"`
	AllocatedMB float64 `json:"controller_allocated_mb"`
	// CPUSeconds is the CPU time each process used until the phase was
	// done (without settle): the cluster's processes by binary, the
	// controller and "bench" (this process: the load generator and its
	// watches).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
}

// TestBench measures the controller on a local cluster. It runs only with
// AGENT_SANDBOX_BENCH=1 (make bench); BENCH_N sets the number of Sandboxes
// (default 500) and BENCH_OUT a file for the JSON. Each phase's CPU profile
// of the controller is saved as .work/bench-profiles/<phase>.pprof.
func TestBench(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	n := envInt(t, "BENCH_N", 500)
	claims := envInt(t, "BENCH_CLAIMS", 100)
	nodes := benchNodes(t, n, claims)
	res := Result{N: n, Nodes: nodes}
	if err := os.RemoveAll(filepath.Join(tests.RepoRoot(), profileDir)); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	local, c := startBenchCluster(t, "bench", nodes)
	// Progress is counted from informers, not by listing: polling large
	// lists would load the API server and skew both measurements.
	watched := newWatch(t, local.Config, "", &corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{})
	startWatch(t, watched)

	// The baselines, each in its own namespace, gone before the controller
	// starts: raw first (it also warms the cluster up), then the floor.
	res.Raw = measureRaw(t, local.Config, watched, n)
	t.Logf("raw done: %.2fs", res.Raw.Seconds)
	// The claims floor is measured twice: next to the floor's n Running
	// Sandboxes, as the controller's claims run next to its own n, and on
	// the cluster emptied again.
	var besideFloor ClaimsFloor
	res.Floor, res.FloorSuspend, res.FloorResume = measureFloor(t, local.Config, c, watched, n, floorOptions{cycle: true, beside: func() {
		besideFloor = measureClaimsFloor(t, "claims_floor_next_to_n", local.Config, c, watched, claims, pacedClaims(t, claims))
		t.Logf("claims floor next to %d done: p99 %.0f ms (bursts %v), paced p99 %.0f ms", n, besideFloor.P99Ms, besideFloor.P99sMs, besideFloor.PacedP99Ms)
	}})
	t.Logf("floor done: %.2fs (suspend %.2fs, resume %.2fs)", res.Floor.Seconds, res.FloorSuspend.Seconds, res.FloorResume.Seconds)
	res.Raw.RatioToFloor = res.Raw.Seconds / res.Floor.Seconds
	claimsFloor := measureClaimsFloor(t, "claims_floor", local.Config, c, watched, claims, pacedClaims(t, claims))
	t.Logf("claims floor done: p99 %.0f ms (bursts %v), paced p99 %.0f ms", claimsFloor.P99Ms, claimsFloor.P99sMs, claimsFloor.PacedP99Ms)
	claimsRefillFloor := refillFloor(t, local.Config, c, watched, claims)

	ctrl := startController(t, local.Kubeconfig)
	defer ctrl.stop(t)
	settle()
	time.Sleep(memorySettle)
	// Resident memory first: serving a heap profile maps in the code and
	// function tables that encode it (~20 MiB), and serving metrics some.
	res.ControllerStartRSSMB, _ = ctrl.rssMB()
	res.ControllerStartRSSSplitMB = ctrl.rssSplitMB()
	res.ControllerStartGoMemMB = ctrl.goMemMB(t)
	var err error
	if _, res.ControllerStartHeapMB, err = saveHeap(ctrl.pprof, "start"); err != nil {
		t.Fatal(err)
	}

	ns := mkNamespace(t, c, "sandboxes")
	measure := func(name string, p *Phase, do func(), done func() bool) {
		pr := ctrl.begin(t, name)
		stretch := beginStretch(t, local.Config)
		start := time.Now()
		do()
		for !done() {
			time.Sleep(50 * time.Millisecond)
		}
		p.Seconds = time.Since(start).Seconds()
		p.RatioToFloor = p.Seconds / res.Floor.Seconds
		switch name {
		case "suspend_all":
			p.RatioToCold, p.RatioToOwnFloor = p.Seconds/res.Cold.Seconds, p.Seconds/res.FloorSuspend.Seconds
		case "resume_all":
			p.RatioToCold, p.RatioToOwnFloor = p.Seconds/res.Cold.Seconds, p.Seconds/res.FloorResume.Seconds
		}
		p.CPUSeconds, p.APIServerRequests = stretch.end(t, name)
		p.EtcdRequests = stretch.etcdDiff
		settle()
		pr.end(t, p, n)
		// Each phase is printed as it ends, so a run cut short keeps them.
		if b, err := json.Marshal(p); err == nil {
			t.Logf("%s done: %s", name, b)
		}
	}

	measure("cold_create", &res.Cold, func() {
		parallel(n, func(i int) error { return c.Create(ctx, benchSandbox(ns, i)) }, t)
	}, func() bool {
		return countReady(t, watched, ns, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady) == n
	})

	measure("metadata_touch", &res.Touch, func() {
		parallel(n, func(i int) error {
			return patch(ctx, c, ns, i, `{"metadata":{"labels":{"touched":"yes"}}}`)
		}, t)
	}, func() bool { return true })

	measure("suspend_all", &res.Suspend, func() {
		parallel(n, func(i int) error { return patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Suspended"}}`) }, t)
	}, func() bool {
		return countCondition(t, watched, ns, sandboxv1beta1.ConditionSuspended, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated) == n
	})

	measure("resume_all", &res.Resume, func() {
		parallel(n, func(i int) error { return patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Running"}}`) }, t)
	}, func() bool {
		return countReady(t, watched, ns, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady) == n
	})

	idle := idleSeconds(t)
	measure("idle", &res.Idle, func() { time.Sleep(idle) }, func() bool { return true })

	// The claims run next to the n Running Sandboxes (the controller's
	// caches full, as in production), and before delete_all: after it the
	// cluster's garbage collector would still be deleting their Pods,
	// Services and NetworkPolicies while the claims are measured.
	claimsNS := mkNamespace(t, c, "claims")
	res.WarmClaims = benchClaims(t, local.Config, c, watched, ctrl, claimsNS, claims)
	res.WarmClaims.withFloor(claimsFloor)
	res.WarmClaims.besideFloor(besideFloor)
	res.WarmClaims.withRefillFloor(claimsRefillFloor)

	measure("delete_all", &res.Delete, func() {
		// One request per Sandbox, as users delete them: a single
		// deletecollection of thousands of Sandboxes outlasts the API
		// server's request timeout.
		parallel(n, func(i int) error {
			sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)}}
			return client.IgnoreNotFound(c.Delete(ctx, sb))
		}, t)
	}, func() bool {
		var l sandboxv1beta1.SandboxList
		_ = watched.List(ctx, &l, client.InNamespace(ns), client.UnsafeDisableDeepCopy)
		return len(l.Items) == 0
	})

	res.ControllerRequestsByVerb = ctrl.requestsByVerb(t)
	res.Applies = ctrl.series(t, "agent_sandbox_apply_total")
	_, res.ControllerPeakRSSMB = ctrl.rssMB()
	settle()
	time.Sleep(memorySettle)
	res.ControllerEndRSSMB, _ = ctrl.rssMB() // before the heap profile, as at start
	res.ControllerEndRSSSplitMB = ctrl.rssSplitMB()
	res.ControllerEndGoMemMB = ctrl.goMemMB(t)
	if _, res.ControllerEndHeapMB, err = saveHeap(ctrl.pprof, "end"); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("BENCH_FLOORS_AFTER") != "0" {
		ctrl.stop(t)
		dropNamespace(t, c, ns)
		dropNamespace(t, c, claimsNS)
		settle()
		after, _, _ := measureFloor(t, local.Config, c, watched, n, floorOptions{keep: true, name: "floor_cold_after"})
		res.FloorAfter = &after
		res.ColdRatioToFloorsAround = ratio(res.Cold.Seconds, (res.Floor.Seconds+after.Seconds)/2)
		t.Logf("floor after done: %.2fs (cold create %.3f of the floors around)", after.Seconds, res.ColdRatioToFloorsAround)
	}
	report(t, res, "BENCH_OUT")
}

// report prints a bench's JSON document and writes it to the file the
// environment variable outEnv names, if set.
// startBenchCluster starts a local cluster of nodes nodes with the CRDs
// installed (stopped when the test ends, and its directory removed unless
// BENCH_KEEP_WORKDIR=1; clusterDirOf is its directory) and returns it with
// a client.
func startBenchCluster(t *testing.T, name string, nodes int) (*cluster.Cluster, client.Client) {
	t.Helper()
	workdir, err := os.MkdirTemp("", "agent-sandbox-bench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("BENCH_KEEP_WORKDIR") == "1" { // its logs, the stand-in's among them
			t.Logf("BENCH_KEEP_WORKDIR=1: the cluster's directory %s is kept", workdir)
			return
		}
		_ = os.RemoveAll(workdir)
	})
	local, err := cluster.Start(context.Background(), cluster.Options{
		Name: name, Workdir: workdir, Nodes: nodes, InstallCRDs: true, RuntimeClasses: []string{"gvisor"},
		APIServerGCTrace: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := local.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	clusterDirOf = filepath.Join(local.Workdir, "clusters", local.Name)
	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return local, c
}

func report(t *testing.T, res any, outEnv string) {
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(out))
	if path := os.Getenv(outEnv); path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func benchSandbox(ns string, i int) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			Service: ptr.To(true),
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				RuntimeClassName: ptr.To("gvisor"),
				Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
			}},
		}},
	}
}

func patch(ctx context.Context, c client.Client, ns string, i int, body string) error {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)}}
	return c.Patch(ctx, sb, client.RawPatch(types.MergePatchType, []byte(body)))
}
