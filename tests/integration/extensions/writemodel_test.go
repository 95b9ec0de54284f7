package extensions

import (
	"encoding/json"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// entries counts the managedFields entries of manager on o by operation
// (main resource only).
func entries(o client.Object, mgr string) (apply, update int) {
	for _, m := range o.GetManagedFields() {
		if m.Manager != mgr || m.Subresource != "" {
			continue
		}
		switch m.Operation {
		case metav1.ManagedFieldsOperationApply:
			apply++
		case metav1.ManagedFieldsOperationUpdate:
			update++
		}
	}
	return apply, update
}

// poolLabels are the labels a pool gives its members, which an adoption
// removes.
var poolLabels = []string{sandboxv1beta1.LabelWarmPoolSandbox, sandboxv1beta1.LabelSandboxTemplateHash}

// TestWarmMemberOwnedThroughApplyEntry: a warm member made by Engine.Create
// (create-only) ends with its fields in our manager's Apply entry, not in
// the create's Update entry, so a later apply of ours can remove fields.
func TestWarmMemberOwnedThroughApplyEntry(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	eventually(t, "the member's ownership is an Apply entry", func() error {
		list := &sandboxv1beta1.SandboxList{}
		if err := env.Client.List(ctxFor(t), list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d members", len(list.Items))
		}
		if a, u := entries(&list.Items[0], manager.FieldManager); a != 1 || u != 0 {
			return fmt.Errorf("%s has %d Apply and %d Update entries, want 1 and 0: %+v", manager.FieldManager, a, u, list.Items[0].ManagedFields)
		}
		return nil
	})
}

// standaloneMember creates, with the engine, a Sandbox shaped as a pool
// member of a pool that does not exist (no reconciler of this test's
// namespace takes it, and envtest runs no garbage collector).
func standaloneMember(t *testing.T, e *ssa.Engine, ns, name string) *sandboxv1beta1.Sandbox {
	t.Helper()
	if _, _, err := e.Create(ctxFor(t), "Sandbox", memberApply(ns, name), &sandboxv1beta1.Sandbox{}); err != nil {
		t.Fatal(err)
	}
	live, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// memberApply is a Sandbox shaped as a member of a pool that does not
// exist, as an apply configuration.
func memberApply(ns, name string) *sandboxac.SandboxApplyConfiguration {
	return sandboxac.Sandbox(name, ns).
		WithLabels(map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "h1", sandboxv1beta1.LabelSandboxTemplateHash: "t1",
			sandboxv1beta1.LabelLaunchType: sandboxv1beta1.LaunchTypeWarm}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(extv1beta1.GroupVersion.String()).WithKind("SandboxWarmPool").
			WithName("gone").WithUID(types.UID("pool-" + name)).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(sandboxac.SandboxSpec().WithPodTemplate(sandboxac.PodTemplate().
			WithObjectMeta(sandboxac.PodMetadata().WithLabels(map[string]string{"app": "agent"})).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("agent").WithImage("agent:1")))))
}

func ghostClaim(ns string) *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost", UID: "ghost-uid"}}
}

// TestAdoptionIsAnApplyGuardedByResourceVersion: the adopt step, rendered
// from a member as read, fails with a Conflict and changes nothing once the
// member moved on; rendered again from the member as it is, it removes the
// pool's labels and reference by server-side apply and keeps the spec and
// what another manager set.
func TestAdoptionIsAnApplyGuardedByResourceVersion(t *testing.T) {
	ns := env.Namespace(t)
	e := ssa.New(env.Client, manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)
	stale := standaloneMember(t, e, ns, "member")
	if a, u := entries(stale, manager.FieldManager); a != 1 || u != 0 {
		t.Fatalf("after Engine.Create: %d Apply and %d Update entries of ours, want 1 and 0", a, u)
	}
	// Someone else labels the member: its resourceVersion moves on.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"keep":"me"}}}`))
	if err := env.Client.Patch(ctxFor(t), stale.DeepCopy(), patch, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}

	step, err := render.AdoptionStep(ghostClaim(ns), nil, stale, manager.FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	ac := step.Object.(*sandboxac.SandboxApplyConfiguration)
	_, err = ssa.Apply(ctxFor(t), e, "Sandbox", ac, stale, sandboxac.ExtractSandbox, ssa.Options{Force: true})
	if !apierrors.IsConflict(err) || ssa.IsConflict(err) {
		t.Fatalf("adoption with a stale resourceVersion: %v, want a plain Conflict", err)
	}
	after, _ := get(t, ns, "member", &sandboxv1beta1.Sandbox{})
	// The Sandbox reconciler may have written status or pod-name since,
	// but nothing of the adoption is there.
	if ref := metav1.GetControllerOf(after); ref == nil || ref.Kind != "SandboxWarmPool" || after.Labels[sandboxv1beta1.LabelWarmPoolSandbox] == "" ||
		after.Labels[sandboxv1beta1.LabelClaimUID] != "" {
		t.Fatalf("the refused adoption changed the member: owners %+v labels %v", after.OwnerReferences, after.Labels)
	}

	// Taken as it is now (looked at again while the Sandbox reconciler
	// still moves it on).
	for attempt := 0; ; attempt++ {
		step, err = render.AdoptionStep(ghostClaim(ns), nil, after, manager.FieldManager)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ssa.Apply(ctxFor(t), e, "Sandbox", step.Object.(*sandboxac.SandboxApplyConfiguration), after, sandboxac.ExtractSandbox, ssa.Options{Force: true})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			t.Fatalf("adoption: %v", err)
		}
		after, _ = get(t, ns, "member", &sandboxv1beta1.Sandbox{})
	}
	adopted, _ := get(t, ns, "member", &sandboxv1beta1.Sandbox{})
	assertAdopted(t, adopted, ghostClaim(ns).UID, render.Adopted(ghostClaim(ns), nil, after))
}

// TestAdoptionNeverRecreatesADeletedMember: a member deleted after a claim
// chose it (its pool scaled down, another controller took and released
// it) is not brought back by the adoption's apply: a server-side apply of
// an object that does not exist creates it, whatever resourceVersion it
// carries; the member's UID in the apply is what refuses it.
func TestAdoptionNeverRecreatesADeletedMember(t *testing.T) {
	ns := env.Namespace(t)
	e := ssa.New(env.Client, manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)
	member := standaloneMember(t, e, ns, "member")
	step, err := render.AdoptionStep(ghostClaim(ns), nil, member, manager.FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctxFor(t), member.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	_, err = ssa.Apply(ctxFor(t), e, "Sandbox", step.Object.(*sandboxac.SandboxApplyConfiguration), member, sandboxac.ExtractSandbox, ssa.Options{Force: true})
	if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		t.Fatalf("adopting a deleted member: %v, want a Conflict or NotFound", err)
	}
	if _, err := get(t, ns, "member", &sandboxv1beta1.Sandbox{}); err == nil {
		t.Fatalf("the adoption of a deleted member created a Sandbox of its name")
	}
}

// assertAdopted checks a Sandbox as a claim's adoption must leave it: the
// claim its only owner, the pool's labels gone, exactly what
// render.Adopted (what the policies judged) says, our ownership an Apply
// entry.
func assertAdopted(t *testing.T, got *sandboxv1beta1.Sandbox, claim types.UID, want *sandboxv1beta1.Sandbox) {
	t.Helper()
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != claim || len(got.OwnerReferences) != 1 {
		t.Errorf("owners %+v, want the claim only", got.OwnerReferences)
	}
	for _, l := range poolLabels {
		if _, ok := got.Labels[l]; ok {
			t.Errorf("pool label %s still there: %v", l, got.Labels)
		}
	}
	if got.Labels["keep"] != "me" {
		t.Errorf("a label another manager set is gone: %v", got.Labels)
	}
	if a, u := entries(got, manager.FieldManager); a != 1 || u != 0 {
		t.Errorf("%d Apply and %d Update entries of ours, want 1 and 0", a, u)
	}
	for what, pair := range map[string][2]any{
		"labels":      {got.Labels, want.Labels},
		"annotations": {got.Annotations, want.Annotations},
		"owners":      {got.OwnerReferences, want.OwnerReferences},
		"spec":        {got.Spec, want.Spec},
	} {
		g, _ := json.Marshal(pair[0])
		w, _ := json.Marshal(pair[1])
		if string(g) != string(w) {
			t.Errorf("adopted %s\n%s\nwant (render.Adopted)\n%s", what, g, w)
		}
	}
}

// TestAdoptionOfAMemberOwnedThroughAnUpdateEntry: a warm member whose
// fields our manager owns through an Update entry (made by an older
// controller, or its upgrade after the create was lost) is still taken
// whole: upgraded first, then applied, it loses the pool's labels and
// reference, and another manager's entry stays.
func TestAdoptionOfAMemberOwnedThroughAnUpdateEntry(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	_, members := waitPool(t, ns, "pool", 1)
	m := members[0]
	// As an older controller left it: our entry an Update one, and a
	// label someone else set.
	fields := make([]metav1.ManagedFieldsEntry, len(m.ManagedFields))
	for i, f := range m.ManagedFields {
		if f.Manager == manager.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			f.Operation = metav1.ManagedFieldsOperationUpdate
		}
		fields[i] = f
	}
	body, _ := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": fields},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": m.ResourceVersion},
	})
	if err := env.Client.Patch(ctxFor(t), m.DeepCopy(), client.RawPatch(types.JSONPatchType, body)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctxFor(t), m.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"keep":"me"}}}`)),
		client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	old, _ := get(t, ns, m.Name, &sandboxv1beta1.Sandbox{})
	if a, u := entries(old, manager.FieldManager); a != 0 || u != 1 {
		t.Fatalf("set-up: %d Apply and %d Update entries of ours, want 0 and 1", a, u)
	}

	create(t, newClaim(ns, "claim", "pool"))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	if claim.Status.Sandbox.Name != m.Name {
		t.Fatalf("claim bound to %q, want the member %s", claim.Status.Sandbox.Name, m.Name)
	}
	adopted, _ := get(t, ns, m.Name, &sandboxv1beta1.Sandbox{})
	assertAdopted(t, adopted, claim.UID, render.Adopted(claim, nil, old))
	// The upgrade rewrites the whole managedFields list: made from the
	// cached member, which keeps only our managers' entries, it would
	// have dropped someone else's.
	if a, u := entries(adopted, "someone-else"); a+u != 1 || adopted.Labels["keep"] != "me" {
		t.Errorf("someone-else's entry (%d Apply, %d Update) or label %q lost on adoption", a, u, adopted.Labels["keep"])
	}
}
