package extensions

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// ourPVC is the PVC a Sandbox's volume claim template makes, controlled by
// that Sandbox.
func ourPVC(ns, name string) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	return corev1ac.PersistentVolumeClaim(name, ns).
		WithLabels(map[string]string{sandboxv1beta1.LabelSandboxNameHash: "12345678"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(sandboxv1beta1.GroupVersion.String()).
			WithKind("Sandbox").WithName("box").WithUID("uid-of-box").WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().WithAccessModes(corev1.ReadWriteOnce).
			WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")})))
}

// TestCreateOnlyApplyLeavesANamesakeAlone plays a stale view of a PVC: the
// controller's plan saw no PVC work-box, but alice made one a moment ago
// (the cache has not shown it). The plan's apply, create-only as every
// step for an object the plan saw none of is, writes nothing to hers: no
// owner reference of ours (which would have the garbage collector delete
// her PVC with our Sandbox), no label, no field; the change is Pending, so
// the Sandbox looks again once its cache shows the PVC. A plain apply, as
// the steps sent before, takes it over. A missing PVC is created by the
// same apply, in one request, owned through our Apply entry.
func TestCreateOnlyApplyLeavesANamesakeAlone(t *testing.T) {
	ns := env.Namespace(t)
	var w writes
	e := ssa.New(countingClient(t, &w, nil), manager.FieldManager, manager.StatusManager)
	e.ReadWith(env.Client)
	ctx := ctxFor(t)
	var none *corev1.PersistentVolumeClaim

	c, err := ssa.Apply(ctx, e, "PersistentVolumeClaim", ourPVC(ns, "fresh"), none, corev1ac.ExtractPersistentVolumeClaim, ssa.Options{CreateOnly: true})
	if err != nil || c.Action != ssa.Created || c.Pending {
		t.Fatalf("a missing PVC: %v, %+v; want created", err, c)
	}
	made, err := get(t, ns, "fresh", &corev1.PersistentVolumeClaim{})
	if err != nil {
		t.Fatal(err)
	}
	if a, u := entries(made, manager.FieldManager); a != 1 || u != 0 || metav1.GetControllerOf(made) == nil || w.applies.Load() != 1 {
		t.Errorf("created with %d Apply and %d Update entries of ours, controller %v, in %d applies; want 1, 0, ours, 1",
			a, u, metav1.GetControllerOf(made), w.applies.Load())
	}

	theirs := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work-box", Labels: map[string]string{"owner": "alice"}}}
	theirs.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	theirs.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	if err := env.Client.Create(ctx, theirs, client.FieldOwner("alice")); err != nil {
		t.Fatal(err)
	}
	sent := w.applies.Load()
	c, err = ssa.Apply(ctx, e, "PersistentVolumeClaim", ourPVC(ns, "work-box"), none, corev1ac.ExtractPersistentVolumeClaim, ssa.Options{CreateOnly: true})
	if err != nil || c.Action != ssa.Unchanged || !c.Pending {
		t.Fatalf("alice's PVC, unseen: %v, %+v; want unchanged and pending", err, c)
	}
	after, err := get(t, ns, "work-box", &corev1.PersistentVolumeClaim{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.OwnerReferences) != 0 || after.Labels[sandboxv1beta1.LabelSandboxNameHash] != "" || after.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("alice's PVC took our writes: owners %v, labels %v, resourceVersion %s (was %s)",
			after.OwnerReferences, after.Labels, after.ResourceVersion, theirs.ResourceVersion)
	}
	if a, u := entries(after, manager.FieldManager); a+u != 0 || w.applies.Load()-sent != 1 {
		t.Errorf("we own fields of alice's PVC (%d Apply, %d Update entries), in %d applies", a, u, w.applies.Load()-sent)
	}

	// What a plain apply does to it: the hazard.
	if _, err := ssa.Apply(ctx, e, "PersistentVolumeClaim", ourPVC(ns, "work-box"), none, corev1ac.ExtractPersistentVolumeClaim, ssa.Options{}); err != nil {
		t.Fatal(err)
	}
	if taken, err := get(t, ns, "work-box", &corev1.PersistentVolumeClaim{}); err != nil || metav1.GetControllerOf(taken) == nil {
		t.Errorf("a plain apply left alice's PVC alone (%v): the create-only case above shows nothing", err)
	}
}
