package extensions

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// blindClient reads pools and templates from the API server but sees no
// Sandboxes and no Pods at all: a cache that lags as far behind as a cache
// can. Writes go to the API server.
type blindClient struct{ client.Client }

func (c blindClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *sandboxv1beta1.Sandbox, *corev1.Pod:
		return apierrors.NewNotFound(schema.GroupResource{Resource: "sandboxes"}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c blindClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*sandboxv1beta1.SandboxList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// TestPoolNeverOverCreatesOnStaleCache runs pool reconciles that cannot see
// any member, again and again, by one reconciler (as the controller's own,
// whose cache lags behind its writes): the members it created and cannot
// see yet are expected and never created again, so it adds at most one
// pool's worth next to the running controller's members (member names are
// random, as upstream's, so only what a reconciler remembers keeps it from
// creating again), and the running controller removes that excess.
func TestPoolNeverOverCreatesOnStaleCache(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 5))
	pool, _ := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})
	blind := blindClient{env.Client}
	r := &controllers.WarmPoolReconciler{
		Client: blind, Engine: ssa.New(blind, manager.FieldManager, manager.StatusManager),
		Recorder: events.NewFakeRecorder(100), MaxBatch: 300,
	}
	r.SetDefaults()
	for i := range 6 {
		if _, err := r.Reconcile(ctxFor(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)}); err != nil {
			t.Fatalf("blind reconcile %d: %v", i, err)
		}
	}
	members := func() ([]sandboxv1beta1.Sandbox, error) {
		var list sandboxv1beta1.SandboxList
		if err := env.Client.List(ctxFor(t), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for _, sb := range list.Items {
			if ref := metav1.GetControllerOf(&sb); ref == nil || ref.UID != pool.UID {
				return nil, fmt.Errorf("%s is not a member of the pool", sb.Name)
			}
		}
		return list.Items, nil
	}
	list, err := members()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) > 10 {
		t.Fatalf("%d Sandboxes after 6 blind reconciles of a pool of 5 (plus the running controller's 5): %v", len(list), sandboxNames(list))
	}
	eventually(t, "the excess removed", func() error {
		list, err := members()
		if err == nil && len(list) != 5 {
			err = fmt.Errorf("%d members: %v", len(list), sandboxNames(list))
		}
		return err
	})
}

func sandboxNames(items []sandboxv1beta1.Sandbox) []string {
	out := make([]string, 0, len(items))
	for _, sb := range items {
		out = append(out, sb.Name)
	}
	return out
}

// TestTwoControllersNeverDoubleBind runs a second, independent set of
// controllers (own caches, own warm queues, no leader election between
// them) next to the first, and races 30 claims for a pool of 8: every
// claim gets exactly one Sandbox, no Sandbox serves two claims, and the
// pool settles at its size.
func TestTwoControllersNeverDoubleBind(t *testing.T) {
	second, err := manager.Start(env.Config, env.Scheme, manager.Options{Extensions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := second.Stop(); err != nil {
			t.Errorf("second manager: %v", err)
		}
	})
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 8))
	waitPool(t, ns, "pool", 8)

	var claims []string
	for i := range 30 {
		n := fmt.Sprintf("c%02d", i)
		claims = append(claims, n)
		create(t, newClaim(ns, n, "pool"))
	}
	for _, n := range claims {
		waitClaim(t, ns, n, metav1.ConditionTrue, "")
	}
	byLaunch := checkBindings(t, ns, claims)
	t.Logf("launch types with two controllers: %v", byLaunch)
	// Two controllers with no leader election between them may both fill
	// the pool (member names are random, as upstream's); the excess goes.
	eventually(t, "30 bound Sandboxes and 8 in the pool", func() error {
		var list sandboxv1beta1.SandboxList
		if err := env.Client.List(ctxFor(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 30+8 {
			return fmt.Errorf("%d Sandboxes", len(list.Items))
		}
		return nil
	})
	waitPool(t, ns, "pool", 8)
}
