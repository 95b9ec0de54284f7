package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// TestOwnEchoIsOnlyOurStatus: an update whose only change is the status we
// wrote last is not reconciled; any other change folded into it, another
// resourceVersion, or no memory of a write is.
func TestOwnEchoIsOnlyOurStatus(t *testing.T) {
	r := &SandboxReconciler{Engine: ssa.New(nil, "mgr", "mgr-status")}
	old := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
		Name: "box", Namespace: "ns", UID: "u1", ResourceVersion: "4", Generation: 2,
		Labels: map[string]string{"a": "1"}, Annotations: map[string]string{sandboxv1beta1.AnnotationPodName: "box"},
	}}
	ours := func() *sandboxv1beta1.Sandbox {
		sb := old.DeepCopy()
		sb.ResourceVersion = "5"
		sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionFalse}}
		return sb
	}
	if r.isOwnEcho(old, ours()) {
		t.Fatal("skipped with no status write remembered")
	}
	r.memory.status.Remember(client.ObjectKeyFromObject(old), old.UID, statusRecord[*sandboxv1beta1.SandboxStatus]{intent: "x", resourceVersion: "5"})
	if !r.isOwnEcho(old, ours()) {
		t.Error("the echo of our status write was reconciled")
	}
	now := metav1.Now()
	for name, change := range map[string]func(*sandboxv1beta1.Sandbox){
		"another resourceVersion": func(sb *sandboxv1beta1.Sandbox) { sb.ResourceVersion = "6" },
		"spec (generation)":       func(sb *sandboxv1beta1.Sandbox) { sb.Generation++ },
		"a label":                 func(sb *sandboxv1beta1.Sandbox) { sb.Labels["a"] = "2" },
		"an annotation":           func(sb *sandboxv1beta1.Sandbox) { delete(sb.Annotations, sandboxv1beta1.AnnotationPodName) },
		"a finalizer":             func(sb *sandboxv1beta1.Sandbox) { sb.Finalizers = []string{"f"} },
		"an owner": func(sb *sandboxv1beta1.Sandbox) {
			sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "x", UID: "x"}}
		},
		"deletion":    func(sb *sandboxv1beta1.Sandbox) { sb.DeletionTimestamp = &now },
		"another UID": func(sb *sandboxv1beta1.Sandbox) { sb.UID = "u2" },
	} {
		sb := ours()
		change(sb)
		if r.isOwnEcho(old, sb) {
			t.Errorf("%s folded into our status write: not reconciled", name)
		}
	}
	if r.isOwnEcho(&corev1.Pod{ObjectMeta: old.ObjectMeta}, ours()) {
		t.Error("an object of another type was taken for an echo")
	}
}
