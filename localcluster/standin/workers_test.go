package standin

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// A Sandbox whose runtime is to stop does not hold back a new Pod's
// runtime, even with one worker: the stop of "old", stuck in its last step
// (the read of the PVCs it may have left), runs apart while "new", queued
// after it, gets its runtime. Once the read answers, "old" is finished.
func TestStopsDoNotHoldBackStarts(t *testing.T) {
	f := newFakeCluster(t)
	s := f.standIn(t)
	s.o.Workers = 1
	old, fresh := Key{"ns", "old"}, Key{"ns", "new"}
	f.sandbox(t, "old", "old-uid")
	oldPod := f.pod(t, "old", "old-uid", "old-pod")
	reconcileOK(t, s, old)
	// Its Pod and its Sandbox go; its stop waits on the PVCs' list.
	if err := f.idx.Delete(oldPod); err != nil {
		t.Fatal(err)
	}
	if err := f.dyn.Resource(sandboxes).Namespace("ns").Delete(context.Background(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	listing, answer := make(chan struct{}, 1), make(chan struct{})
	f.pods.PrependReactor("list", "persistentvolumeclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case listing <- struct{}{}:
		default:
		}
		<-answer
		return false, nil, nil
	})
	f.sandbox(t, "new", "new-uid")
	f.pod(t, "new", "new-uid", "new-pod")

	s.releasing = make(chan struct{}, s.o.Workers)
	s.queue.Add(old)
	s.queue.Add(fresh)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for s.next(ctx, &wg) {
		}
	})
	stopped := false
	defer func() {
		if !stopped {
			close(answer)
		}
		s.queue.ShutDown()
		cancel()
		wg.Wait()
	}()

	select {
	case <-listing:
	case <-time.After(30 * time.Second):
		t.Fatal("the stop of old never reached its read of PVCs")
	}
	for deadline := time.Now().Add(30 * time.Second); !s.Serving(fresh); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("new got no runtime while old's stop was under way")
		}
	}
	if _, err := f.kwokObject(portForwards, "old"); err == nil {
		t.Fatal("old's PortForward is still there: its stop should have deleted it before reading PVCs")
	}
	close(answer)
	stopped = true
	for deadline := time.Now().Add(30 * time.Second); s.queue.Len() > 0 || exists(SandboxDir(f.dir, old)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("old's directory is still there after its stop was let through")
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
