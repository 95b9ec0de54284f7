package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// probe measures the controller over one phase: the requests it sent, its
// CPU time and a CPU profile.
type probe struct {
	ctrl     *controller
	name     string
	requests map[string]int64
	applies  map[string]int64
	codes    map[string]int64
	recs     map[string]int64
	cpu      float64
	prof     *profiler
	// runtime is the controller's collector cycles and bytes allocated
	// when the phase began (runtimeCounters).
	runtime [2]float64
}

// begin starts measuring a phase named name (the name of its profile file).
func (c *controller) begin(t *testing.T, name string) *probe {
	t.Helper()
	return &probe{
		ctrl: c, name: name, requests: c.requestsByVerb(t), applies: c.series(t, "agent_sandbox_apply_total"),
		codes: c.series(t, "rest_client_requests_total"), recs: c.series(t, "controller_runtime_reconcile_total"),
		cpu: procCPU(c.cmd.Process.Pid), prof: startProfile(c.pprof), runtime: c.runtimeCounters(t),
	}
}

// end fills in what the controller did since begin, for n Sandboxes (or
// claims): it is called after the phase's settle(), so that its tail counts.
func (pr *probe) end(t *testing.T, p *Phase, n int) {
	t.Helper()
	// Resident memory first: serving metrics and profiles maps in code.
	p.ControllerRSSMB, p.ControllerPeakRSSMB = pr.ctrl.rssMB()
	p.ControllerCPUSeconds = round2(procCPU(pr.ctrl.cmd.Process.Pid) - pr.cpu)
	p.ByVerb = diff(pr.ctrl.requestsByVerb(t), pr.requests)
	p.Applies = diff(pr.ctrl.series(t, "agent_sandbox_apply_total"), pr.applies)
	p.Responses = diff(pr.ctrl.series(t, "rest_client_requests_total"), pr.codes)
	p.Reconciles = diff(pr.ctrl.series(t, "controller_runtime_reconcile_total"), pr.recs)
	p.Requests = 0
	for _, v := range p.ByVerb {
		p.Requests += v
	}
	p.RequestsPerSandbox = float64(p.Requests) / float64(n)
	p.WritesPerSandbox = float64(writes(p.ByVerb)) / float64(n)
	path, err := pr.prof.finish(pr.name)
	if err != nil {
		t.Fatal(err)
	}
	p.Profile = path
	if p.HeapProfile, p.HeapInuseMB, err = saveHeap(pr.ctrl.pprof, pr.name); err != nil {
		t.Fatal(err)
	}
	p.GoMemMB = pr.ctrl.goMemMB(t)
	now := pr.ctrl.runtimeCounters(t)
	p.GCCycles, p.AllocatedMB = int64(now[0]-pr.runtime[0]), round2((now[1]-pr.runtime[1])/(1<<20))
}

// runtimeCounters reads the controller's Go collector cycles
// (go_gc_duration_seconds_count) and bytes allocated so far
// (go_memstats_alloc_bytes_total) from its /metrics.
func (c *controller) runtimeCounters(t *testing.T) [2]float64 {
	t.Helper()
	var out [2]float64
	c.scrape(t, func(line string) {
		for i, name := range []string{"go_gc_duration_seconds_count ", "go_memstats_alloc_bytes_total "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					out[i] = f
				}
			}
		}
	})
	return out
}

// mkNamespaces makes k namespaces with mkNamespace.
func mkNamespaces(t *testing.T, c client.Client, prefix string, k int) []string {
	t.Helper()
	namespaces := make([]string, k)
	for i := range namespaces {
		namespaces[i] = mkNamespace(t, c, prefix)
	}
	return namespaces
}

// benchNamespaces is BENCH_NAMESPACES (1): how many namespaces n Sandboxes
// are spread over, from 1 to n.
func benchNamespaces(t *testing.T, n int) int {
	t.Helper()
	k := envInt(t, "BENCH_NAMESPACES", 1)
	if k < 1 || k > n {
		t.Fatalf("BENCH_NAMESPACES=%d: want 1 to BENCH_N (%d)", k, n)
	}
	return k
}

// mkNamespace creates a namespace and waits for its default ServiceAccount
// (Pods are refused until the controller-manager has made it).
func mkNamespace(t *testing.T, c client.Client, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for c.Get(context.Background(), types.NamespacedName{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default ServiceAccount after a minute", ns.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ns.Name
}

// parallel runs f for 0..n-1 on 50 goroutines and fails the test on the
// first error.
func parallel(n int, f func(int) error, t *testing.T) {
	if err := runParallel(n, 50, f); err != nil {
		t.Fatal(err)
	}
}

// runParallel runs f for 0..n-1 on the given number of goroutines and
// returns the first error (it may be called off the test's goroutine).
func runParallel(n, goroutines int, f func(int) error) error {
	var wg sync.WaitGroup
	work := make(chan int)
	var mu sync.Mutex
	var first error
	for range goroutines {
		wg.Go(func() {
			for i := range work {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

func waitPods(t *testing.T, c client.Reader, ns string, n int) {
	for {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		if ready == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// podReady reports a Pod Ready with an IP.
func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
			return true
		}
	}
	return false
}

func countReady(t *testing.T, c cache.Cache, ns string, status metav1.ConditionStatus, reason string) int {
	return countCondition(t, c, ns, sandboxv1beta1.ConditionReady, status, reason)
}

// countCondition counts the Sandboxes of ns with a condition. It is polled
// every 50 ms while a phase runs, so it reads the watch's indexer in place:
// a List, even without deep copies, copied every Sandbox struct into the
// list by reflection, 20 times a second (at N=5000 some 50 CPU-s in a
// 300 s phase, taken from the cluster it measures, and only in the
// controller's phases, whose polling starts with them).
func countCondition(t *testing.T, c cache.Cache, ns, typ string, status metav1.ConditionStatus, reason string) int {
	inf, err := c.GetInformer(context.Background(), &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	indexed, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		t.Fatalf("the watch's informer %T has no indexer", inf)
	}
	objs, err := indexed.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		sb, ok := o.(*sandboxv1beta1.Sandbox)
		if !ok {
			continue
		}
		if hasCondition(sb, typ, status, reason) {
			n++
		}
	}
	return n
}

// hasCondition says whether sb holds a condition of type typ with that
// status and reason.
func hasCondition(sb *sandboxv1beta1.Sandbox, typ string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range sb.Status.Conditions {
		if c.Type == typ && c.Status == status && c.Reason == reason {
			return true
		}
	}
	return false
}

// clusterDirOf is the running cluster's directory, for CPU accounting.
var clusterDirOf string

// settle waits for the controller to finish reacting to the last events, so
// that a phase's request count includes its tail, and for the cluster to
// be quiet before the next phase: 3 s, then until the cluster's processes
// and the controller together use less than quietCores over a second
// (after thousands of Pods start or stop, kube-controller-manager works
// through their Services' endpoints for a while, and would otherwise be
// measured in the next phase), but at most settleMax more.
func settle() {
	time.Sleep(3 * time.Second)
	prev := clusterCPU()
	for deadline := time.Now().Add(settleMax); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		cur := clusterCPU()
		if cur-prev < quietCores {
			return
		}
		prev = cur
	}
}

// memorySettle is how long the controller is left quiet before its
// settled memory is read (at start, at the end of TestBench): a controller
// quiet for two looks 2 s apart gives back its executable's pages
// (--release-code-pages), for five its heap's free pages
// (--release-free-heap), which may take a second at N=20000.
const memorySettle = 14 * time.Second

// quietCores is the CPU use (in cores) below which settle counts the
// cluster as quiet, and settleMax how long past its first 3 s it waits
// for that.
const (
	quietCores = 0.5
	settleMax  = 2 * time.Minute
)

// clusterCPU is the CPU seconds the cluster's processes and the
// controller have used so far (the bench itself left out); 0 when no
// bench cluster is running (clusterDirOf unset).
func clusterCPU() float64 {
	if clusterDirOf == "" {
		return 0
	}
	total := 0.0
	for name, s := range cpuByProcess(clusterDirOf) {
		if name != "bench" {
			total += s
		}
	}
	return total
}

func diff(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// cpuByProcess returns the CPU seconds (user+system) used so far by the
// cluster's processes (named by their binary), the controller and this
// process (the load generator).
func cpuByProcess(clusterDir string) map[string]float64 {
	out := map[string]float64{"bench": procCPU(os.Getpid())}
	if controllerPID > 0 {
		out["sandbox-controller"] = procCPU(controllerPID)
	}
	for _, pid := range cluster.Processes(clusterDir) {
		if pid == controllerPID {
			continue // its --kubeconfig is in the cluster's directory
		}
		args := processArgs(pid)
		if args == nil {
			continue
		}
		out[filepath.Base(args[0])] += procCPU(pid)
	}
	return out
}

// procCPU reads utime+stime of a process from /proc/<pid>/stat (0 if it
// is gone).
func procCPU(pid int) float64 {
	cpu, _, _ := tests.ProcCPU(pid)
	return cpu
}

func cpuDiff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0.005 {
			out[k] = float64(int(d*100)) / 100
		}
	}
	return out
}
