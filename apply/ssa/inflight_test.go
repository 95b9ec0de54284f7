package ssa

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestConcurrentCreatesWriteOnce: workers that plan the create of one
// object at once (the namespace's NetworkPolicy, not cached yet) send one
// apply; the others wait for it and send nothing. A create that failed
// leaves the next worker to send its own; another object is not held up.
func TestConcurrentCreatesWriteOnce(t *testing.T) {
	var sent atomic.Int64
	var failFirst atomic.Bool
	gate, entered := make(chan struct{}), make(chan struct{}, 100)
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			sent.Add(1)
			if np, ok := obj.(*networkingv1ac.NetworkPolicyApplyConfiguration); ok && *np.Name == "shared" {
				entered <- struct{}{}
				<-gate
				if failFirst.CompareAndSwap(true, false) {
					return errors.New("the API server is away")
				}
			}
			return nil
		},
	}).Build()
	apply := func(e *Engine, name string) (Change, error) {
		desired := networkingv1ac.NetworkPolicy(name, "ns").WithSpec(networkingv1ac.NetworkPolicySpec().WithPolicyTypes(networkingv1.PolicyTypeIngress))
		return Apply(context.Background(), e, "NetworkPolicy", desired, (*networkingv1.NetworkPolicy)(nil), networkingv1ac.ExtractNetworkPolicy, Options{})
	}
	run := func(fail bool) (errs int) {
		e := New(c, "m", "s")
		sent.Store(0)
		failFirst.Store(fail)
		gate = make(chan struct{})
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 20 {
			wg.Go(func() {
				if _, err := apply(e, "shared"); err != nil {
					failed.Add(1)
				}
			})
		}
		// Another object is written while the shared one is held up.
		<-entered
		if _, err := apply(e, "other"); err != nil {
			t.Fatal(err)
		}
		if n := sent.Load(); n != 2 {
			t.Errorf("with one create held up: %d applies sent, want 2 (one of each object)", n)
		}
		time.Sleep(20 * time.Millisecond)
		close(gate)
		wg.Wait()
		for len(entered) > 0 {
			<-entered
		}
		return int(failed.Load())
	}
	if errs := run(false); errs != 0 || sent.Load() != 2 {
		t.Errorf("20 concurrent creates of one object: %d applies sent, %d failed; want 2 sent (with the other object), none failed", sent.Load(), errs)
	}
	if errs := run(true); errs != 1 || sent.Load() != 3 {
		t.Errorf("the first create failing: %d applies sent, %d failed; want 3 sent (the failed one, the next, the other object), 1 failed", sent.Load(), errs)
	}
}
