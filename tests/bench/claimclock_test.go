package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimClock times claims of one namespace from the bench's watch: when
// each create was sent and took, when the watch first saw each claim and
// when it first saw it Ready. The controller's claims and the claims floor
// are timed by the same clock.
type claimClock struct {
	ns      string
	mu      sync.Mutex
	sent    map[string]time.Time
	created map[string]time.Duration
	seenAt  map[string]time.Time
	readyAt map[string]time.Time
	// The per-claim timeline (claimTimeline): when the controller says
	// it first observed each claim (its annotation), when the watch first
	// saw a Sandbox controlled by it, and the claim with its Sandbox's
	// name annotation.
	observedAt  map[string]time.Time
	adoptedAt   map[string]time.Time
	annotatedAt map[string]time.Time
	// traceContext is each claim's trace-context annotation, as the Go
	// SDK sets it: which of the SDK's spans made the claim.
	traceContext map[string]string
	// members are the pool members the watch saw, by name (member).
	members map[string]memberSpan
	// events are the SandboxAdopted Events the watch saw, by name (event).
	events map[string]adoptedEvent
	// gc, if set, gives the controller's garbage collections so far, for
	// the timelines (gcOverlap).
	gc func() []gcWindow
	// apiGC, if set, returns the API server's collections so far
	// (apiServerGCLog), for the timelines of either side.
	apiGC func() []gcWindow
	// apiserver, if set, is the API server whose served requests (and,
	// with BENCH_APISERVER_PROFILE=1, CPU profile) are taken per burst.
	apiserver *rest.Config
}

// stretch is what the cluster does over a stretch of time (a burst or a
// series of claims, a restart), from beginStretch to end.
type stretch struct {
	apiserver    *rest.Config
	cpu          map[string]float64
	served, etcd map[string]int64
	own          map[string]int64
	etcdDisk     map[string]int64
	api          *profiler
	// etcdDiff is what the API server sent etcd over the stretch, by
	// operation and resource (apiServerCounts), once it ended, and ownDiff
	// the work it did on its own (parseAPIServerMetrics).
	etcdDiff, ownDiff map[string]int64
	// etcdDiskDiff is what etcd itself did over the stretch (etcdOwn):
	// its commits and fsyncs, how many were slow, its collections.
	etcdDiskDiff map[string]int64
}

// beginStretch begins a stretch: the CPU each process has used so far, what
// the API server apiserver reaches has served (apiServerCounts; nothing
// when nil) and, with BENCH_APISERVER_PROFILE=1, its CPU profile.
func beginStretch(t *testing.T, apiserver *rest.Config) *stretch {
	t.Helper()
	s := &stretch{apiserver: apiserver, cpu: cpuByProcess(clusterDirOf), etcdDisk: etcdOwn(clusterDirOf)}
	if apiserver != nil {
		s.served, s.etcd, s.own = apiServerCounts(apiserver)
		s.api = startAPIServerProfile(t, apiserver)
	}
	return s
}

// measure begins a stretch of the clock's API server.
func (k *claimClock) measure(t *testing.T) *stretch {
	t.Helper()
	return beginStretch(t, k.apiserver)
}

// end returns the CPU seconds each process used over the stretch and what
// the API server served (nil without one), both read as it ends, before
// the API server's profile (up to a chunk longer) is written as
// apiserver-<phase>.pprof.
func (s *stretch) end(t *testing.T, phase string) (cpu map[string]float64, served map[string]int64) {
	t.Helper()
	cpu = cpuDiff(cpuByProcess(clusterDirOf), s.cpu)
	if s.etcdDisk != nil {
		s.etcdDiskDiff = diff(etcdOwn(clusterDirOf), s.etcdDisk)
	}
	if s.apiserver != nil {
		now, etcd, own := apiServerCounts(s.apiserver)
		served, s.etcdDiff, s.ownDiff = diff(now, s.served), diff(etcd, s.etcd), diff(own, s.own)
	}
	finishAPIServerProfile(t, s.api, phase)
	return cpu, served
}

// startClaimClock watches the claims of ns until stop is called.
func startClaimClock(t *testing.T, watched cache.Cache, ns string) (k *claimClock, stop func()) {
	t.Helper()
	k = &claimClock{ns: ns, sent: map[string]time.Time{}, created: map[string]time.Duration{},
		seenAt: map[string]time.Time{}, readyAt: map[string]time.Time{},
		observedAt: map[string]time.Time{}, adoptedAt: map[string]time.Time{}, annotatedAt: map[string]time.Time{},
		traceContext: map[string]string{}, members: map[string]memberSpan{}, events: map[string]adoptedEvent{},
		apiGC: apiServerGC.windows}
	stops := []func(){
		onEach(t, watched, &extv1beta1.SandboxClaim{}, k.seen),
		onEach(t, watched, &sandboxv1beta1.Sandbox{}, k.adopted),
		onEach(t, watched, &eventsv1.Event{}, k.event),
	}
	return k, func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// onEach calls seen with each object of obj's kind the watch adds or
// updates, until the returned function is called.
func onEach(t *testing.T, watched cache.Cache, obj client.Object, seen func(any)) (stop func()) {
	t.Helper()
	informer, err := watched.GetInformer(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = informer.RemoveEventHandler(reg) }
}

// adopted notes when the watch first saw a Sandbox controlled by a claim.
func (k *claimClock) adopted(obj any) {
	sb, ok := obj.(*sandboxv1beta1.Sandbox)
	if !ok || sb.Namespace != k.ns {
		return
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != extv1beta1.ClaimKind.Kind {
		k.member(sb, now)
		return
	}
	if _, ok := k.adoptedAt[ref.Name]; !ok {
		k.adoptedAt[ref.Name] = now
	}
}

func (k *claimClock) seen(obj any) {
	cl, ok := obj.(*extv1beta1.SandboxClaim)
	if !ok || cl.Namespace != k.ns {
		return
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seenAt[cl.Name]; !ok {
		k.seenAt[cl.Name] = now
	}
	if _, ok := k.annotatedAt[cl.Name]; !ok && cl.Annotations[extv1beta1.AnnotationSandboxName] != "" {
		k.annotatedAt[cl.Name] = now
	}
	if tc := cl.Annotations[sandboxv1beta1.AnnotationTraceContext]; tc != "" {
		k.traceContext[cl.Name] = tc
	}
	if _, ok := k.observedAt[cl.Name]; !ok {
		if at, err := time.Parse(time.RFC3339Nano, cl.Annotations[extv1beta1.AnnotationControllerFirstObservedAt]); err == nil {
			k.observedAt[cl.Name] = at
		}
	}
	for _, cond := range cl.Status.Conditions {
		if cond.Type == extv1beta1.ConditionReady && cond.Status == metav1.ConditionTrue {
			if _, ok := k.readyAt[cl.Name]; !ok {
				k.readyAt[cl.Name] = now
			}
		}
	}
}

// sentAt records that the create of the claim name was sent at began and
// took d (for claims made elsewhere than burst and paced).
func (k *claimClock) sentAt(name string, began time.Time, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sent[name], k.created[name] = began, d
}

func benchClaim(ns, name string) *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
}

// burst creates m claims named <prefix>-<i> at once (every request is
// ready before the first is sent, so they reach the API server together)
// and waits until the watch has seen each Ready.
func (k *claimClock) burst(t *testing.T, c client.Client, prefix string, m int) {
	t.Helper()
	ctx := context.Background()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range m {
		name := fmt.Sprintf("%s-%d", prefix, i)
		wg.Go(func() {
			cl := benchClaim(k.ns, name)
			<-gate
			began := time.Now()
			k.mu.Lock()
			k.sent[name] = began
			k.mu.Unlock()
			if err := c.Create(ctx, cl); err != nil {
				t.Error(err)
			}
			k.mu.Lock()
			k.created[name] = time.Since(began)
			k.mu.Unlock()
		})
	}
	close(gate)
	wg.Wait()
	for _, name := range k.names(prefix, m) {
		k.waitReady(name)
	}
}

// paced creates n claims named <prefix>-<i> one at a time, each once the
// previous one is Ready and 200 ms have passed: claims on a cluster not
// saturated by them. It returns their latencies, sorted.
func (k *claimClock) paced(t *testing.T, c client.Client, prefix string, n int) []float64 {
	t.Helper()
	var lat []float64
	for _, name := range k.names(prefix, n) {
		began := time.Now()
		k.mu.Lock()
		k.sent[name] = began
		k.mu.Unlock()
		if err := c.Create(context.Background(), benchClaim(k.ns, name)); err != nil {
			t.Fatal(err)
		}
		k.mu.Lock()
		k.created[name] = time.Since(began)
		k.mu.Unlock()
		lat = append(lat, ms(k.waitReady(name).Sub(began)))
		time.Sleep(200 * time.Millisecond)
	}
	sort.Float64s(lat)
	return lat
}

func (k *claimClock) names(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return names
}

// waitReady returns when the watch first saw the claim Ready.
func (k *claimClock) waitReady(name string) time.Time {
	for {
		k.mu.Lock()
		at, ok := k.readyAt[name]
		k.mu.Unlock()
		if ok {
			return at
		}
		time.Sleep(time.Millisecond)
	}
}

// latencies returns, sorted, for the claims named <prefix>-<i>: from
// sending each create to seeing the claim Ready, from first seeing it to
// seeing it Ready, and the create requests' durations.
func (k *claimClock) latencies(prefix string, n int) (lat, seenLat, createLat []float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, name := range k.names(prefix, n) {
		at := k.readyAt[name]
		lat = append(lat, ms(at.Sub(k.sent[name])))
		seenLat = append(seenLat, ms(at.Sub(k.seenAt[name])))
		createLat = append(createLat, ms(k.created[name]))
	}
	for _, l := range [][]float64{lat, seenLat, createLat} {
		sort.Float64s(l)
	}
	return lat, seenLat, createLat
}

// PacedUse is what a series of paced claims cost: the CPU seconds each
// process used over it and what the API server served, from every client,
// by verb and resource (apiServerCounts). Next to the floor's it tells
// how much work besides the claims' own (a pool's refill, its Pods,
// scheduling, endpoints) shared the API server with them.
type PacedUse struct {
	CPUSeconds  map[string]float64 `json:"paced_cpu_seconds,omitempty"`
	APIRequests map[string]int64   `json:"paced_apiserver_requests,omitempty"`
	// EtcdRequests is what the API server sent etcd over the series, by
	// operation and resource (apiServerCounts): updates beyond the
	// writes served are optimistic puts tried again.
	EtcdRequests map[string]int64 `json:"paced_etcd_requests,omitempty"`
	// APIServerOwn is the API server's own work over the series (its
	// collections and their CPU; parseAPIServerMetrics), and EtcdDisk
	// etcd's commits, fsyncs and collections (etcdOwn): what a claim's
	// writes may have waited behind, which a series' other work makes
	// more of.
	APIServerOwn map[string]int64 `json:"paced_apiserver_own,omitempty"`
	EtcdDisk     map[string]int64 `json:"paced_etcd_disk,omitempty"`
}

// pacedMeasured is paced, with what the series cost (PacedUse) and, with
// BENCH_APISERVER_PROFILE=1, the API server's profile of it as
// apiserver-<phase>.pprof and what it allocated as
// apiserver-<phase>.allocs.pprof (with BENCH_TRACE=1, its execution trace
// as apiserver-<phase>.trace).
func (k *claimClock) pacedMeasured(t *testing.T, c client.Client, prefix string, n int, phase string) ([]float64, PacedUse) {
	t.Helper()
	s := k.measure(t)
	allocs := apiServerAllocs(k.apiserver)
	tr := startAPIServerTrace(t, k.apiserver, phase, pacedTraceSeconds(n))
	lat := k.paced(t, c, prefix, n)
	var use PacedUse
	use.CPUSeconds, use.APIRequests = s.end(t, phase)
	use.EtcdRequests, use.APIServerOwn, use.EtcdDisk = s.etcdDiff, s.ownDiff, s.etcdDiskDiff
	saveAllocsSince(t, k.apiserver, allocs, phase)
	tr.wait(t)
	return lat, use
}
