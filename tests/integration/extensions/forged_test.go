package extensions

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// forged is a Sandbox a user makes directly (no webhook runs here, as on a
// cluster without ours) whose controller reference names owner's name and
// UID under apiVersion and kind, with the spec (and labels) of model.
func forged(ns, name string, model *sandboxv1beta1.Sandbox, apiVersion, kind string, owner metav1.Object) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(model.Labels),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *model.Spec.DeepCopy(),
	}
	return sb
}

// holdsFor checks cond every 100ms for d; it fails the test the first time
// cond returns an error.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestForgedPoolMemberIsNotThePools: a Ready Sandbox whose controller
// reference says SandboxWarmPool under another API group, with the real
// pool's name and UID (and a real member's labels), written under the
// controller's own field manager name (anyone may use any), is not a
// member: the pool does not count it (nor delete it as excess), and claims
// on the pool take only the pool's own members or get Sandboxes of their
// own.
func TestForgedPoolMemberIsNotThePools(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	pool, members := waitPool(t, ns, "pool", 1)

	fake := forged(ns, "forged", &members[0], "evil.example.com/v1", "SandboxWarmPool", pool)
	if err := env.Client.Create(ctxFor(t), fake, client.FieldOwner(manager.FieldManager)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the forged Sandbox is Ready", func() error {
		sb, err := get(t, ns, "forged", &sandboxv1beta1.Sandbox{})
		if err != nil || !ready(sb) {
			return fmt.Errorf("not Ready yet (err %w)", err)
		}
		return nil
	})
	ignored := func() error {
		p, err := get(t, ns, "pool", &extv1beta1.SandboxWarmPool{})
		if err != nil {
			return err
		}
		if p.Status.Replicas != 1 {
			// For the post-mortem: every Sandbox and its controller.
			var l sandboxv1beta1.SandboxList
			_ = env.Client.List(ctxFor(t), &l, client.InNamespace(ns))
			for _, sb := range l.Items {
				t.Logf("Sandbox %s: controller %v, Ready %v, deleting %v", sb.Name, metav1.GetControllerOf(&sb), ready(&sb), sb.DeletionTimestamp != nil)
			}
			return fmt.Errorf("pool counts %d members, want 1 (the forged one counted)", p.Status.Replicas)
		}
		if sb, err := get(t, ns, "forged", &sandboxv1beta1.Sandbox{}); err != nil || sb.DeletionTimestamp != nil {
			return fmt.Errorf("the forged Sandbox was deleted by the pool (err %w)", err)
		}
		return nil
	}
	holdsFor(t, 3*time.Second, "the pool ignores the forged member", ignored)

	for i := range 3 {
		create(t, newClaim(ns, fmt.Sprintf("c%d", i), "pool"))
	}
	for i := range 3 {
		name := fmt.Sprintf("c%d", i)
		c := waitClaim(t, ns, name, metav1.ConditionTrue, "")
		if c.Status.Sandbox.Name == "forged" {
			t.Errorf("claim %s adopted the forged Sandbox", name)
		}
	}
	// The claims' adoptions made the pool look again: it refills to one
	// member of its own, and still leaves the forged one alone.
	waitPool(t, ns, "pool", 1)
	holdsFor(t, 3*time.Second, "the pool ignores the forged member", ignored)
	sb, err := get(t, ns, "forged", &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.APIVersion != "evil.example.com/v1" {
		t.Errorf("the forged Sandbox's controller is now %v", ref)
	}
}

// TestClaimBindsOnlyASandboxItsControllerMade: a Sandbox made before the
// claim's controller acted, whose controller reference names the claim (its
// name and UID) under another API group, is not the claim's: under the
// claim's own name the claim is refused with upstream's message (it does
// not take it), and under another name the claim ignores it and gets its
// own Sandbox.
func TestClaimBindsOnlyASandboxItsControllerMade(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	// The claims' pool does not exist yet: they wait unbound.
	create(t, newTemplate(ns, "tpl"), newClaim(ns, "squatted", "later"), newClaim(ns, "lured", "later"))
	squatted := waitClaim(t, ns, "squatted", metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound)
	lured := waitClaim(t, ns, "lured", metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound)
	model := &sandboxv1beta1.Sandbox{}
	model.Spec.PodTemplate = newTemplate(ns, "tpl").Spec.PodTemplate
	create(t,
		forged(ns, "squatted", model, "evil.example.com/v1", "SandboxClaim", squatted),
		forged(ns, "bait", model, "evil.example.com/v1", "SandboxClaim", lured))
	create(t, newPool(ns, "later", "tpl", 0))

	c := waitClaim(t, ns, "squatted", metav1.ConditionFalse, extv1beta1.ReasonReconcilerError)
	r := findCondition(c.Status.Conditions, extv1beta1.ConditionReady)
	if want := `sandbox "squatted" is not controlled by claim "squatted"`; !strings.Contains(r.Message, want) {
		t.Errorf("claim squatted reports %q, want it to say %s", r.Message, want)
	}
	if c.Status.Sandbox.Name != "" {
		t.Errorf("claim squatted is bound to %q", c.Status.Sandbox.Name)
	}
	c = waitClaim(t, ns, "lured", metav1.ConditionTrue, "")
	if c.Status.Sandbox.Name != "lured" {
		t.Errorf("claim lured is bound to %q, want its own Sandbox lured", c.Status.Sandbox.Name)
	}
	own, err := get(t, ns, "lured", &sandboxv1beta1.Sandbox{})
	if err != nil || !extv1beta1.IsClaimedBy(own, lured) {
		t.Errorf("Sandbox lured is not the claim's (err %v)", err)
	}
	// Neither forged Sandbox was taken over or deleted.
	for _, name := range []string{"squatted", "bait"} {
		sb, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && sb.DeletionTimestamp != nil):
			t.Errorf("the forged Sandbox %s was deleted", name)
		case err != nil:
			t.Fatal(err)
		case metav1.GetControllerOf(sb).APIVersion != "evil.example.com/v1":
			t.Errorf("the forged Sandbox %s changed controller: %v", name, metav1.GetControllerOf(sb))
		}
	}
}
