package bench

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// readyCount follows, from the watch's events, which Sandboxes of some
// namespaces are Ready (DependenciesReady), and says when n are. The cold
// creates of TestBenchScale and TestBenchRestart, and the floor's, wait
// on it rather than poll countReady: the poll read every Sandbox of the
// namespaces 20 times a second from the controller's first create on (the
// floor's only once its writes were done). At N=20000 the bench used
// 158.8 CPU-s over the controller's cold create against 75.3 over the
// floor's, on a 2-core machine the cluster held, and the ratio was 1.22;
// waiting on events, 36.6 against 71.6, and 1.01. Each event costs one
// look at one Sandbox's conditions.
type readyCount struct {
	in    map[string]bool
	n     int
	mu    sync.Mutex
	ready map[string]bool
	done  chan struct{}
	stop  func()
}

// watchReady starts a readyCount of namespaces on the watch's Sandbox
// informer (which delivers what it holds already as adds); wait stops
// it.
func watchReady(t *testing.T, watched cache.Cache, namespaces []string, n int) *readyCount {
	t.Helper()
	r := newReadyCount(namespaces, n)
	inf, err := watched.GetInformer(context.Background(), &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.note(o, false) },
		UpdateFunc: func(_, o any) { r.note(o, false) },
		DeleteFunc: func(o any) { r.note(o, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.stop = func() { _ = inf.RemoveEventHandler(reg) }
	return r
}

func newReadyCount(namespaces []string, n int) *readyCount {
	r := &readyCount{in: map[string]bool{}, n: n, ready: map[string]bool{}, done: make(chan struct{}), stop: func() {}}
	for _, ns := range namespaces {
		r.in[ns] = true
	}
	return r
}

// note records one event's Sandbox: Ready, or not (gone, or no longer
// Ready). Once n are Ready, done is closed, and stays so.
func (r *readyCount) note(obj any, gone bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	sb, ok := obj.(*sandboxv1beta1.Sandbox)
	if !ok || !r.in[sb.Namespace] {
		return
	}
	key := sb.Namespace + "/" + sb.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if !gone && hasCondition(sb, sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady) {
		r.ready[key] = true
	} else {
		delete(r.ready, key)
	}
	if len(r.ready) >= r.n {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
	}
}

// wait blocks until n Sandboxes have been Ready at once, then stops
// following.
func (r *readyCount) wait() {
	<-r.done
	r.stop()
}

// TestReadyCount feeds readyCount the events of a cold create: Sandboxes
// of other namespaces and ones not yet Ready do not count, one that stops
// being Ready or is deleted (also as a tombstone) no longer counts, and
// done closes only once n are Ready at once.
func TestReadyCount(t *testing.T) {
	sb := func(ns, name string, ready bool) *sandboxv1beta1.Sandbox {
		s := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if ready {
			s.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: sandboxv1beta1.ReasonDependenciesReady}}
		}
		return s
	}
	closed := func(r *readyCount) bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	}
	r := newReadyCount([]string{"a", "b"}, 3)
	r.note(sb("a", "x", true), false)
	r.note(sb("other", "x", true), false)
	r.note(sb("b", "x", false), false)
	r.note(sb("b", "y", true), false)
	if closed(r) || len(r.ready) != 2 {
		t.Fatalf("after 2 Ready in the namespaces: ready %v, done %v", r.ready, closed(r))
	}
	r.note(sb("a", "x", false), false) // no longer Ready
	r.note(sb("b", "x", true), false)
	if closed(r) || len(r.ready) != 2 {
		t.Fatalf("one stopped being Ready: ready %v, done %v", r.ready, closed(r))
	}
	r.note(toolscache.DeletedFinalStateUnknown{Key: "b/y", Obj: sb("b", "y", true)}, true)
	r.note(sb("a", "x", true), false)
	if closed(r) || len(r.ready) != 2 {
		t.Fatalf("a tombstone: ready %v, done %v", r.ready, closed(r))
	}
	r.note(sb("b", "y", true), false)
	if !closed(r) {
		t.Fatalf("3 Ready: done not closed (ready %v)", r.ready)
	}
	r.note(sb("b", "z", true), false) // closing twice would panic
	r.wait()
}
