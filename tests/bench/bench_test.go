package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// Result is the JSON document the benchmark prints.
type Result struct {
	N     int `json:"n"`
	Nodes int `json:"nodes"`
	// Raw is the lower bound: one client creating N Pods + N headless
	// Services directly, measured until every Pod is Running and Ready.
	Raw Phase `json:"raw_pods_and_services"`
	// Cold is N Sandboxes (with a Service) created at once, until all Ready.
	Cold Phase `json:"cold_create"`
	// Touch is a metadata-only change to every Sandbox.
	Touch   Phase `json:"metadata_touch"`
	Suspend Phase `json:"suspend_all"`
	Resume  Phase `json:"resume_all"`
	Delete  Phase `json:"delete_all"`
	// ControllerRequestsByVerb is every request the controller sent during
	// the run, from its rest_client_requests_total.
	ControllerRequestsByVerb map[string]int64 `json:"controller_requests_by_verb"`
	// ControllerPeakRSSMB is the controller process's peak resident memory.
	ControllerPeakRSSMB float64 `json:"controller_peak_rss_mb"`
	// Applies are the controller's agent_sandbox_apply_total by kind/action.
	Applies map[string]int64 `json:"controller_apply_total"`
	// WarmClaims is the warm pool and claims scenario.
	WarmClaims Claims `json:"warm_claims"`
}

// Phase is one measured step.
type Phase struct {
	Seconds float64 `json:"seconds"`
	// RatioToRaw compares with the raw lower bound (cold create, suspend, resume).
	RatioToRaw float64 `json:"ratio_to_raw,omitempty"`
	// Requests is what the controller sent during the phase.
	Requests           int64            `json:"controller_requests"`
	RequestsPerSandbox float64          `json:"controller_requests_per_sandbox"`
	ByVerb             map[string]int64 `json:"controller_requests_by_verb,omitempty"`
	// CPUSeconds is the CPU time each process used during the phase: the
	// profile that says where the time went ("bench" is this process, which
	// hosts the controller and the load generator).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
}

// TestBench measures the controller on a local cluster. It runs only with
// AGENT_SANDBOX_BENCH=1 (make bench); BENCH_N sets the number of Sandboxes
// (default 500) and BENCH_OUT a file for the JSON.
func TestBench(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	n := 500
	if v := os.Getenv("BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("BENCH_N=%q: want a positive integer", v)
		}
	}
	claims := 100
	if v := os.Getenv("BENCH_CLAIMS"); v != "" {
		var err error
		if claims, err = strconv.Atoi(v); err != nil || claims <= 0 {
			t.Fatalf("BENCH_CLAIMS=%q: want a positive integer", v)
		}
	}
	nodes := max(10, n/100+1)
	res := Result{N: n, Nodes: nodes}

	ctx := context.Background()
	workdir, err := os.MkdirTemp("", "agent-sandbox-bench-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()
	local, err := cluster.Start(ctx, cluster.Options{
		Name: "bench", Workdir: workdir, Nodes: nodes, InstallCRDs: true, RuntimeClasses: []string{"gvisor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := local.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Progress is counted from informers, not by listing: polling large
	// lists would load the API server and skew both measurements.
	watched, err := cache.New(local.Config, cache.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{}} {
		if _, err := watched.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	go func() { _ = watched.Start(cacheCtx) }()
	if !watched.WaitForCacheSync(ctx) {
		t.Fatal("bench informers did not sync")
	}

	clusterDir := filepath.Join(local.Workdir, "clusters", local.Name)
	clusterDirOf = clusterDir
	cpuBefore := cpuByProcess(clusterDir)

	// The lower bound, in its own namespace.
	rawNS := mkNamespace(t, c, "raw")
	start := time.Now()
	parallel(n, func(i int) error {
		name := fmt.Sprintf("raw-%d", i)
		labels := map[string]string{"bench": name}
		if err := c.Create(ctx, rawPod(rawNS, name, labels)); err != nil {
			return err
		}
		return c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: rawNS, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8888}}},
		})
	}, t)
	waitPods(t, watched, rawNS, n)
	res.Raw.Seconds = time.Since(start).Seconds()
	res.Raw.CPUSeconds = cpuDiff(cpuByProcess(clusterDir), cpuBefore)
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawNS}}); err != nil {
		t.Fatal(err)
	}
	// Wait until the namespace is gone: deleting its Pods and Services
	// would otherwise load the cluster during the controller's first phase
	// (at N=5000 it more than doubled that phase).
	for {
		err := c.Get(ctx, client.ObjectKey{Name: rawNS}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(time.Second)
	}

	ctrl := startController(t, local.Kubeconfig)
	defer ctrl.stop(t)

	ns := mkNamespace(t, c, "sandboxes")
	measure := func(p *Phase, do func(), done func() bool) {
		before := ctrl.requestsByVerb(t)
		cpu := cpuByProcess(clusterDir)
		start := time.Now()
		do()
		for !done() {
			time.Sleep(50 * time.Millisecond)
		}
		p.Seconds = time.Since(start).Seconds()
		p.CPUSeconds = cpuDiff(cpuByProcess(clusterDir), cpu)
		settle()
		p.ByVerb = diff(ctrl.requestsByVerb(t), before)
		for _, v := range p.ByVerb {
			p.Requests += v
		}
		p.RequestsPerSandbox = float64(p.Requests) / float64(n)
		// Each phase is printed as it ends, so a run cut short keeps them.
		if b, err := json.Marshal(p); err == nil {
			t.Logf("phase done: %s", b)
		}
	}

	measure(&res.Cold, func() {
		parallel(n, func(i int) error { return c.Create(ctx, benchSandbox(ns, i)) }, t)
	}, func() bool {
		return countReady(t, watched, ns, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady) == n
	})
	res.Cold.RatioToRaw = res.Cold.Seconds / res.Raw.Seconds

	measure(&res.Touch, func() {
		parallel(n, func(i int) error {
			return patch(ctx, c, ns, i, `{"metadata":{"labels":{"touched":"yes"}}}`)
		}, t)
	}, func() bool { return true })

	measure(&res.Suspend, func() {
		parallel(n, func(i int) error { return patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Suspended"}}`) }, t)
	}, func() bool {
		return countCondition(t, watched, ns, sandboxv1beta1.ConditionSuspended, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated) == n
	})
	res.Suspend.RatioToRaw = res.Suspend.Seconds / res.Raw.Seconds

	measure(&res.Resume, func() {
		parallel(n, func(i int) error { return patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Running"}}`) }, t)
	}, func() bool {
		return countReady(t, watched, ns, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady) == n
	})
	res.Resume.RatioToRaw = res.Resume.Seconds / res.Raw.Seconds

	measure(&res.Delete, func() {
		// One request per Sandbox, as users delete them: a single
		// deletecollection of thousands of Sandboxes outlasts the API
		// server's request timeout.
		parallel(n, func(i int) error {
			sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)}}
			return client.IgnoreNotFound(c.Delete(ctx, sb))
		}, t)
	}, func() bool {
		var l sandboxv1beta1.SandboxList
		_ = watched.List(ctx, &l, client.InNamespace(ns))
		return len(l.Items) == 0
	})

	res.WarmClaims = benchClaims(t, c, watched, ctrl, mkNamespace(t, c, "claims"), claims)

	res.ControllerRequestsByVerb = ctrl.requestsByVerb(t)
	res.Applies = ctrl.series(t, "agent_sandbox_apply_total")
	res.ControllerPeakRSSMB = ctrl.peakRSSMB()
	report(t, res, "BENCH_OUT")
}

// report prints a bench's JSON document and writes it to the file the
// environment variable outEnv names, if set.
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

func rawPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			RuntimeClassName: ptr.To("gvisor"),
			Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		},
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
