package standin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Options configure a stand-in kubelet.
type Options struct {
	// Config reaches the cluster; the stand-in reads Pods, Sandboxes and
	// PVCs and writes kwok's PortForward, Exec and Logs objects.
	Config *rest.Config
	// Dir holds one directory per Sandbox, Dir/<namespace>/<sandbox>/.
	Dir string
	// Runtime is the sandbox-runtime binary.
	Runtime string
	// Logger receives one line per process started, adopted or stopped
	// and per error; nil logs nothing.
	Logger *slog.Logger
	// Resync is how often every Sandbox is looked at again (a runtime that
	// died is started again, a directory whose Sandbox is gone removed).
	// Default 15s.
	Resync time.Duration
	// Workers is how many Sandboxes are handled at once. Default 4. A
	// Sandbox whose runtime is to stop is handled apart (as many at once
	// again): a wave of stops, each waiting for its runtime to exit, does
	// not hold back the runtimes of new Pods.
	Workers int
	// StopGrace is how long a runtime has after SIGTERM before SIGKILL.
	// Default 10s; the runtime gives running commands half of it.
	StopGrace time.Duration
	// ReadyTimeout bounds the wait for a new runtime to serve. Default 15s.
	ReadyTimeout time.Duration
	// RouterPort, when set, is the port of the host's sandbox router on
	// 127.0.0.1: every namespace but kube-system, kube-public and
	// kube-node-lease then gets upstream's Service sandbox-router-svc and a
	// Ready Pod behind it whose port 8080 kwok forwards to that router (see
	// runRouterService), so that upstream's SDKs find the router where they
	// look for it.
	RouterPort int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Resync <= 0 {
		o.Resync = 15 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 15 * time.Second
	}
	return o
}

// StandIn is a stand-in kubelet; Run runs it.
type StandIn struct {
	o     Options
	cs    kubernetes.Interface
	dyn   dynamic.Interface
	pods  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[Key]
	ready atomic.Bool
	// releasing bounds the Sandboxes handled apart because they have no
	// live Pod (Workers of them at once).
	releasing chan struct{}

	mu      sync.Mutex
	applied map[Key]applied // the kwok objects applied since this stand-in started
	pumps   map[Key]*pumpHandle
}

// applied is what a Sandbox's kwok objects were last applied for.
type applied struct {
	podUID string
	ports  ports
}

type pumpHandle struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New checks the options and builds the clients.
func New(o Options) (*StandIn, error) {
	if o.Config == nil || o.Dir == "" || o.Runtime == "" {
		return nil, errors.New("stand-in kubelet: a cluster config, a directory and the sandbox-runtime binary are required")
	}
	if st, err := os.Stat(o.Runtime); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("stand-in kubelet: %s is not an executable file (build it with `make runtime`)", o.Runtime)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	return &StandIn{
		o: o.withDefaults(), cs: cs, dyn: dyn,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](200*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "standin"}),
		applied: map[Key]applied{}, pumps: map[Key]*pumpHandle{},
	}, nil
}

// Ready reports whether the stand-in has synced its Pod cache and works.
func (s *StandIn) Ready() bool { return s.ready.Load() }

// Serving reports whether the Sandbox k's runtime serves a Pod of it, with
// that Pod's kwok objects applied: what a kubelet's Ready would mean. kwok
// marks a sandbox Pod Ready without waiting for this.
func (s *StandIn) Serving(k Key) bool { return s.lastApplied(k) != (applied{}) }

const sandboxIndex = "sandbox"

// Run watches sandbox Pods and keeps one runtime per Pod until ctx ends. It
// leaves the processes running when it returns: a stand-in started again
// adopts them (StopAll stops them).
func (s *StandIn) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sandboxv1beta1.LabelSandboxNameHash }))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{sandboxIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		k, _ := KeyOf(pod)
		return []string{k.String()}, nil
	}}); err != nil {
		return err
	}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			k, _ := KeyOf(pod)
			s.queue.Add(k)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	s.pods = informer.GetIndexer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("stand-in kubelet: Pod cache not synced: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	if s.o.RouterPort != 0 {
		synced := make(chan struct{})
		routerErr := make(chan error, 1)
		rctx, stopRouter := context.WithCancel(ctx)
		defer stopRouter()
		wg.Go(func() { routerErr <- s.runRouterService(rctx, synced) })
		select {
		case <-synced:
		case err := <-routerErr:
			return err
		}
	}
	s.o.Logger.Info("stand-in kubelet running", "dir", s.o.Dir, "runtime", s.o.Runtime, "routerPort", s.o.RouterPort)
	s.enqueueAll()
	s.ready.Store(true)
	defer s.ready.Store(false)

	s.releasing = make(chan struct{}, s.o.Workers)
	for range s.o.Workers {
		wg.Go(func() {
			for s.next(ctx, &wg) {
			}
		})
	}
	t := time.NewTicker(s.o.Resync)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
			s.enqueueAll()
		}
	}
	s.queue.ShutDown()
	wg.Wait()
	s.stopPumps()
	return nil
}

// enqueueAll queues every Sandbox that has a Pod or a directory.
func (s *StandIn) enqueueAll() {
	for _, obj := range s.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok {
			k, _ := KeyOf(pod)
			s.queue.Add(k)
		}
	}
	keys, err := listKeys(s.o.Dir)
	if err != nil {
		s.o.Logger.Error("listing sandbox directories", "err", err)
	}
	for _, k := range keys {
		s.queue.Add(k)
	}
}

// next handles the next Sandbox queued: on this worker when it has a live
// Pod, else (a runtime to stop, a directory to remove) on a goroutine of
// its own among at most Workers such, so that stops, which wait for the
// runtime to exit, never hold back starts. The queue hands a Sandbox to
// one of them at a time either way: it is Done only once handled.
func (s *StandIn) next(ctx context.Context, wg *sync.WaitGroup) bool {
	k, quit := s.queue.Get()
	if quit {
		return false
	}
	if s.livePod(k) != nil {
		s.handle(ctx, k)
		return true
	}
	wg.Go(func() {
		select {
		case s.releasing <- struct{}{}:
			defer func() { <-s.releasing }()
			s.handle(ctx, k)
		case <-ctx.Done():
			s.queue.Done(k)
		}
	})
	return true
}

// handle reconciles k and marks it Done, queueing it again as reconcile
// asks.
func (s *StandIn) handle(ctx context.Context, k Key) {
	defer s.queue.Done(k)
	after, err := s.reconcile(ctx, k)
	switch {
	case err != nil && ctx.Err() == nil:
		s.o.Logger.Error("sandbox", "sandbox", k.String(), "err", err)
		s.queue.AddRateLimited(k)
	case after > 0:
		s.queue.Forget(k)
		s.queue.AddAfter(k, after)
	default:
		s.queue.Forget(k)
	}
}

// livePod returns the Pod of a Sandbox that should have a runtime: bound to
// a node, not terminating and not finished (the newest, should there be
// several).
func (s *StandIn) livePod(k Key) *corev1.Pod {
	objs, _ := s.pods.ByIndex(sandboxIndex, k.String())
	var live *corev1.Pod
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if live == nil || live.CreationTimestamp.Before(&pod.CreationTimestamp) {
			live = pod
		}
	}
	return live
}

// startPump starts copying a Sandbox's runtime output into its CRI log,
// unless that already runs.
func (s *StandIn) startPump(k Key, sbDir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pumps[k] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &pumpHandle{cancel: cancel, done: make(chan struct{})}
	s.pumps[k] = h
	go func() {
		defer close(h.done)
		pump(ctx, sbDir, 250*time.Millisecond, func(err error) {
			s.o.Logger.Warn("copying the runtime's log", "sandbox", k.String(), "err", err)
		})
	}()
}

// stopPump stops a Sandbox's log pump and waits for its last pass.
func (s *StandIn) stopPump(k Key) {
	s.mu.Lock()
	h := s.pumps[k]
	delete(s.pumps, k)
	s.mu.Unlock()
	if h != nil {
		h.cancel()
		<-h.done
	}
}

func (s *StandIn) stopPumps() {
	s.mu.Lock()
	keys := make([]Key, 0, len(s.pumps))
	for k := range s.pumps {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.stopPump(k)
	}
}
