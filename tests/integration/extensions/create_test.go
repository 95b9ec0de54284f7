package extensions

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// writes counts the requests a client sends that can write.
type writes struct{ creates, patches, applies atomic.Int32 }

// countingClient is env's API server behind a client that counts writes
// and runs refuse (when set) in place of every apply.
func countingClient(t *testing.T, w *writes, refuse func() error) client.Client {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.creates.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.patches.Add(1)
			return c.Patch(ctx, obj, p, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.applies.Add(1)
			if refuse != nil {
				return refuse()
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
}

// TestCreateIsOneApply: Engine.Create makes a missing Sandbox with one
// request, owned through our Apply entry alone, and returns it as the API
// server holds it.
func TestCreateIsOneApply(t *testing.T) {
	ns := env.Namespace(t)
	var w writes
	e := ssa.New(countingClient(t, &w, nil), manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)
	got := &sandboxv1beta1.Sandbox{}
	c, exists, err := e.Create(ctxFor(t), "Sandbox", memberApply(ns, "one"), got)
	if err != nil || exists || c.Action != ssa.Created {
		t.Fatalf("Create: %v, exists %v, %s", err, exists, c.Action)
	}
	if n := w.creates.Load() + w.patches.Load() + w.applies.Load(); n != 1 {
		t.Errorf("%d writes (creates %d, patches %d, applies %d), want 1 apply", n, w.creates.Load(), w.patches.Load(), w.applies.Load())
	}
	live, err := get(t, ns, "one", &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID == "" || got.UID != live.UID || got.ResourceVersion != live.ResourceVersion {
		t.Errorf("returned UID %q RV %q, the API server holds %q %q", got.UID, got.ResourceVersion, live.UID, live.ResourceVersion)
	}
	if a, u := entries(live, manager.FieldManager); a != 1 || u != 0 {
		t.Errorf("%d Apply and %d Update entries of ours, want 1 and 0", a, u)
	}
	if live.Labels[sandboxv1beta1.LabelWarmPoolSandbox] != "h1" || len(live.Spec.PodTemplate.Spec.Containers) != 1 {
		t.Errorf("created as %+v", live.ObjectMeta)
	}
}

// TestCreateNeverWritesToAnExistingObject plays a stale view: a Sandbox of
// the name exists already (another user's, with fields of its own, or one
// being deleted). Create reports it as existing, its one request (the
// apply) was refused, and nothing of ours is on the object: no field of
// our manager, none of our labels, owners or containers. (The suite's
// running controller reconciles the Sandbox meanwhile, so its
// resourceVersion is not compared.)
func TestCreateNeverWritesToAnExistingObject(t *testing.T) {
	ns := env.Namespace(t)
	var w writes
	e := ssa.New(countingClient(t, &w, nil), manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)

	theirs := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken", Labels: map[string]string{"owner": "alice"},
			Finalizers: []string{"example.com/hold"}},
	}
	theirs.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "mine", Image: "alice:1"}}
	if err := env.Client.Create(ctxFor(t), theirs, client.FieldOwner("alice")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(context.Background(), theirs, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	check := func(when string) {
		t.Helper()
		before, err := get(t, ns, "taken", &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		sent := w.creates.Load() + w.patches.Load() + w.applies.Load()
		c, exists, err := e.Create(ctxFor(t), "Sandbox", memberApply(ns, "taken"), &sandboxv1beta1.Sandbox{})
		if err != nil || !exists || c.Action != ssa.Unchanged {
			t.Fatalf("%s: Create gave %v, exists %v, %s; want exists and unchanged", when, err, exists, c.Action)
		}
		if n := w.creates.Load() + w.patches.Load() + w.applies.Load() - sent; n != 1 {
			t.Errorf("%s: Create sent %d writes, want its one apply", when, n)
		}
		after, err := get(t, ns, "taken", &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		if after.UID != before.UID || len(after.OwnerReferences) != 0 || after.Labels["owner"] != "alice" ||
			after.Labels[sandboxv1beta1.LabelWarmPoolSandbox] != "" || after.Labels[sandboxv1beta1.LabelLaunchType] != "" ||
			len(after.Spec.PodTemplate.Spec.Containers) != 1 || after.Spec.PodTemplate.Spec.Containers[0].Image != "alice:1" {
			t.Errorf("%s: the existing Sandbox took our fields: %+v, containers %+v", when, after.ObjectMeta, after.Spec.PodTemplate.Spec.Containers)
		}
		if a, u := entries(after, manager.FieldManager); a+u != 0 {
			t.Errorf("%s: we own fields of someone else's Sandbox (%d Apply, %d Update entries)", when, a, u)
		}
	}
	check("alive")
	if err := env.Client.Delete(ctxFor(t), theirs); err != nil {
		t.Fatal(err)
	}
	check("being deleted")
}

// TestCreateFallsBackWhereApplyCannotCreate: an API server that refuses
// the create by apply (as one whose create path rejects a resourceVersion
// would) gets a create and an ownership upgrade instead, from then on
// without trying the apply again; the Sandbox still ends owned through
// our Apply entry alone, and a name that exists is still never written.
func TestCreateFallsBackWhereApplyCannotCreate(t *testing.T) {
	ns := env.Namespace(t)
	var w writes
	refusal := func() error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Reason: metav1.StatusReasonInternalError, Message: "resourceVersion should not be set on objects to be created"}}
	}
	e := ssa.New(countingClient(t, &w, refusal), manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)
	for i, name := range []string{"first", "second"} {
		if _, exists, err := e.Create(ctxFor(t), "Sandbox", memberApply(ns, name), &sandboxv1beta1.Sandbox{}); err != nil || exists {
			t.Fatalf("Create %s: %v, exists %v", name, err, exists)
		}
		if got := w.applies.Load(); got != 1 {
			t.Fatalf("after %d creates, %d applies tried, want 1", i+1, got)
		}
		live, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		if a, u := entries(live, manager.FieldManager); a != 1 || u != 0 {
			t.Errorf("%s: %d Apply and %d Update entries of ours, want 1 and 0", name, a, u)
		}
	}
	if c, p := w.creates.Load(), w.patches.Load(); c != 2 || p != 2 {
		t.Errorf("%d creates and %d upgrade patches, want 2 and 2", c, p)
	}
	// The manager's Sandbox controller may write "first" meanwhile (its
	// status), so what tells that the engine changed nothing is what it
	// sent: no patch or apply (its create is refused, as exists says).
	before := w.patches.Load() + w.applies.Load()
	if _, exists, err := e.Create(ctxFor(t), "Sandbox", memberApply(ns, "first"), &sandboxv1beta1.Sandbox{}); err != nil || !exists {
		t.Fatalf("Create over an existing Sandbox: %v, exists %v", err, exists)
	}
	if after := w.patches.Load() + w.applies.Load(); after != before {
		t.Errorf("Create over an existing Sandbox sent %d patches or applies", after-before)
	}
}
