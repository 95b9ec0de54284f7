package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// The controller's field managers (its --field-manager default,
// <field-manager>-status and <field-manager>-annotations), so that the
// floor's objects are the controller's to the byte.
const (
	fieldManager      = "agent-sandbox-controller"
	statusManager     = fieldManager + "-status"
	annotationManager = fieldManager + "-annotations"
)

// applyPodName is the contract's write of a Sandbox's
// agents.x-k8s.io/pod-name annotation, as the controller makes it (a
// server-side apply of the annotation alone under its annotations
// manager): set to name, or removed when name is empty (the apply then
// leaves out the one field the manager owned).
func applyPodName(ctx context.Context, c client.Client, sb *sandboxv1beta1.Sandbox, name string) error {
	ac := sandboxac.Sandbox(sb.Name, sb.Namespace).WithUID(sb.UID)
	if name != "" {
		ac.WithAnnotations(map[string]string{sandboxv1beta1.AnnotationPodName: name})
	}
	return c.Apply(ctx, ac, client.FieldOwner(annotationManager), client.ForceOwnership)
}

// applyStatus is the contract's status write of Sandbox sb as the
// controller makes it: the status render.SandboxStatus gives for pod (nil
// when none runs) and its headless Service (service), applied under the
// status manager. It returns what it applied, holding the answer's
// resourceVersion.
func applyStatus(ctx context.Context, c client.Client, sb *sandboxv1beta1.Sandbox, pod *corev1.Pod, service bool) (*sandboxac.SandboxApplyConfiguration, error) {
	pods := 0
	if pod != nil {
		pods = 1
	}
	status := render.SandboxStatus(render.SandboxStatusInputs{
		Sandbox: sb, Pod: pod, Pods: pods, Service: service, ClusterDomain: "cluster.local",
		Now: metav1.NewTime(time.Now().Truncate(time.Second)),
	})
	return status, c.Status().Apply(ctx, status, client.FieldOwner(statusManager), client.ForceOwnership)
}

// Baseline is a lower bound measured by one client with no controller
// running.
type Baseline struct {
	// Seconds is from the first request until the bench's watch sees the
	// last object done (Pods Ready for raw, Sandboxes Ready for the floor).
	Seconds float64 `json:"seconds"`
	// RatioToFloor is Seconds over the floor's (for raw only).
	RatioToFloor float64 `json:"ratio_to_floor,omitempty"`
	// Requests is every request the baseline's client sent, by HTTP method
	// (as the controller's rest_client_requests_total counts them).
	Requests           int64            `json:"requests"`
	RequestsPerSandbox float64          `json:"requests_per_sandbox"`
	ByVerb             map[string]int64 `json:"requests_by_verb,omitempty"`
	// Repairs counts the floor cycle's jobs done again: a request that
	// failed, or a Pod the cluster lost (see floorCycle.resync); included
	// in Requests.
	Repairs int64 `json:"repairs,omitempty"`
	// CPUSeconds is the CPU time each process used meanwhile ("bench" is
	// the client).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
	// APIServerRequests is what the API server served meanwhile, from
	// every client, by verb and resource, and EtcdRequests what it sent
	// etcd (apiServerCounts): the floor's cold create only.
	APIServerRequests map[string]int64 `json:"apiserver_requests,omitempty"`
	EtcdRequests      map[string]int64 `json:"etcd_requests,omitempty"`
}

// countingClient is a client whose requests are counted by HTTP method,
// with the REST mappings of Pods, Services and Sandboxes already resolved
// (their discovery is not counted).
func countingClient(t *testing.T, cfg *rest.Config) (client.Client, *requestCounter) {
	t.Helper()
	counts := &requestCounter{byVerb: map[string]int64{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counts.wrap(rt) })
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, gk := range []schema.GroupKind{{Kind: "Pod"}, {Kind: "Service"}, {Group: sandboxv1beta1.GroupVersion.Group, Kind: "Sandbox"}} {
		if _, err := c.RESTMapper().RESTMapping(gk); err != nil {
			t.Fatal(err)
		}
	}
	counts.reset()
	return c, counts
}

type requestCounter struct {
	mu     sync.Mutex
	byVerb map[string]int64
}

type countingTransport struct {
	next   http.RoundTripper
	counts *requestCounter
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, counts: c}
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.counts.mu.Lock()
	t.counts.byVerb[r.Method]++
	t.counts.mu.Unlock()
	return t.next.RoundTrip(r)
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byVerb = map[string]int64{}
}

// fill sets b's request counts for n Sandboxes.
func (c *requestCounter) fill(b *Baseline, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b.ByVerb = map[string]int64{}
	for k, v := range c.byVerb {
		b.ByVerb[k] = v
		b.Requests += v
	}
	b.RequestsPerSandbox = float64(b.Requests) / float64(n)
}

// measureRaw creates n Pods and n headless Services directly (no Sandbox,
// no status) and waits until every Pod is Ready: the cost of the objects
// alone. The namespace is gone when it returns.
func measureRaw(t *testing.T, cfg *rest.Config, watched cache.Cache, n int) Baseline {
	ctx := context.Background()
	c, counts := countingClient(t, cfg)
	ns := mkNamespace(t, c, "raw")
	cpu := cpuByProcess(clusterDirOf)
	counts.reset()
	start := time.Now()
	parallel(n, func(i int) error {
		name := fmt.Sprintf("raw-%d", i)
		labels := map[string]string{"bench": name}
		if err := c.Create(ctx, rawPod(ns, name, labels)); err != nil {
			return err
		}
		return c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8888}}},
		})
	}, t)
	waitPods(t, watched, ns, n)
	res := Baseline{Seconds: time.Since(start).Seconds(), CPUSeconds: cpuDiff(cpuByProcess(clusterDirOf), cpu)}
	counts.fill(&res, n)
	dropNamespace(t, c, ns)
	return res
}

// floorWorkers is the controller's default --sandbox-concurrent-workers:
// the floor applies with the concurrency the controller has.
const floorWorkers = 100

// measureFloor is the least work any controller of this API causes, done
// by one client with no controller: for each of n Sandboxes (benchSandbox,
// as the cold phase creates them) create it, apply its headless Service and
// Pod as render.Sandbox renders them for the controller and its pod-name
// annotation, and once the Pod is Ready apply the status
// render.SandboxStatus gives then (one status write): the five writes
// upstream's contract requires.
// The concurrency is the cold phase's: 50 goroutines create the Sandboxes
// (as the bench does) and floorWorkers apply the rest from one queue (as
// the controller's workers do). It ends when the bench's watch sees every
// Sandbox Ready, as the cold phase does. Then, as o says, the same
// Sandboxes are suspended and resumed (floorCycle), the lower bounds of
// those phases (zero without), and beside runs next to the n Sandboxes
// Running. The namespace is gone when it returns, unless o.keep.
func measureFloor(t *testing.T, cfg *rest.Config, user client.Client, watched cache.Cache, n int, o floorOptions) (floor, suspend, resume Baseline) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, counts := countingClient(t, cfg)
	namespaces := o.spread(t, c, n)
	inFloor := map[string]bool{}
	for _, each := range namespaces {
		inFloor[each] = true
	}

	// The workers' queue: a Sandbox's Service and Pod once it is created,
	// its status once the bench's watch sees its Pod Ready; 2n jobs in all.
	jobs := make(chan func() error, 2*n)
	var mu sync.Mutex
	queued := map[string]bool{}
	sandboxes := map[string]*sandboxv1beta1.Sandbox{}
	writeStatus := func(pod *corev1.Pod) func() error {
		return func() error {
			mu.Lock()
			sb := sandboxes[pod.Namespace+"/"+pod.Name]
			mu.Unlock()
			_, err := applyStatus(ctx, c, sb, pod, true)
			return err
		}
	}
	informer, err := watched.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !inFloor[pod.Namespace] || !podReady(pod) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if key := pod.Namespace + "/" + pod.Name; !queued[key] {
			queued[key] = true
			jobs <- writeStatus(pod)
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()

	applyChildren := func(sb *sandboxv1beta1.Sandbox) func() error {
		return func() error {
			desired, err := render.Sandbox(render.SandboxInputs{Sandbox: sb, PodName: sb.Name})
			if err != nil {
				return err
			}
			// In the controller's order: Service, Pod, then the Sandbox's
			// pod-name annotation.
			if err := c.Apply(ctx, desired.Service, client.FieldOwner(fieldManager)); err != nil {
				return err
			}
			if err := c.Apply(ctx, desired.Pod, client.FieldOwner(fieldManager)); err != nil {
				return err
			}
			return applyPodName(ctx, c, sb, sb.Name)
		}
	}
	create := func(i int) error {
		sb := benchSandbox(namespaces[i%len(namespaces)], i)
		if err := c.Create(ctx, sb); err != nil {
			return err
		}
		mu.Lock()
		sandboxes[sb.Namespace+"/"+sb.Name] = sb
		mu.Unlock()
		jobs <- applyChildren(sb)
		return nil
	}
	work := func(int) error {
		select {
		case job := <-jobs:
			return job()
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	ready := watchReady(t, watched, namespaces, n)
	stretch := beginStretch(t, cfg)
	counts.reset()
	start := time.Now()
	errs := make(chan error, 2)
	for _, run := range []func() error{
		func() error { return runParallel(n, 50, create) },
		func() error { return runParallel(2*n, floorWorkers, work) },
	} {
		go func() {
			err := run()
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("floor: %v", err)
		}
	}
	ready.wait()
	floor = Baseline{Seconds: time.Since(start).Seconds()}
	floor.CPUSeconds, floor.APIServerRequests = stretch.end(t, o.phase())
	floor.EtcdRequests = stretch.etcdDiff
	counts.fill(&floor, n)
	cancel()
	settle()
	if o.cycle {
		suspend, resume = (&floorCycle{c: c, user: user, counts: counts, watched: watched, ns: namespaces[0], n: n}).run(t)
	}
	if o.beside != nil {
		o.beside() // next to the n Running Sandboxes, as the controller's claims are
	}
	if !o.keep {
		for _, each := range namespaces {
			dropNamespace(t, c, each)
		}
	}
	return floor, suspend, resume
}

// floorOptions are what measureFloor does after the floor's cold create:
// cycle suspends and resumes the Sandboxes, beside (if not nil) runs next
// to them Running, and keep leaves them (their cluster is about to be
// stopped: at N=20000 the namespace's deletion took over an hour).
type floorOptions struct {
	cycle, keep bool
	beside      func()
	// namespaces is how many namespaces the n Sandboxes are spread over,
	// in turn (1 when 0); cycle wants 1.
	namespaces int
	// name names the floor's cold create in API server profiles
	// (apiserver-<name>.pprof); "floor_cold" when empty.
	name string
}

// spread makes the floor's namespaces, as o.namespaces says.
func (o floorOptions) spread(t *testing.T, c client.Client, n int) []string {
	t.Helper()
	k := max(1, o.namespaces)
	if k > n || (o.cycle && k > 1) {
		t.Fatalf("floor: %d namespaces for %d Sandboxes (cycle %v)", k, n, o.cycle)
	}
	return mkNamespaces(t, c, "floor", k)
}

func (o floorOptions) phase() string {
	if o.name == "" {
		return "floor_cold"
	}
	return o.name
}

// dropNamespace deletes a namespace and waits until it is gone: deleting its
// objects would otherwise load the cluster during the next phase (at
// N=5000 it more than doubled the controller's first phase).
func dropNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(time.Second)
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
