package render

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ownedBy reports whether sb controls o (a Pod, Service or PVC): its
// controller reference names sb's API group, kind, name and UID.
func ownedBy(o metav1.Object, sb *sandboxv1beta1.Sandbox) bool {
	return sandboxv1beta1.IsControlledBy(o, sb, sandboxv1beta1.SandboxKind)
}

// controllerRef is the owner reference that makes owner, of kind gvk, the
// controller of an object, as an apply configuration: apimachinery's
// metav1.NewControllerRef (controller, and the owner's deletion in the
// foreground waits for the object). Whether an object is controlled by an
// owner is decided by API group, kind, name and UID (ownedBy, and the
// helpers of the api packages), never by the UID alone as
// metav1.IsControlledBy does; the typed reference is metav1.NewControllerRef
// itself.
func controllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	ref := metav1.NewControllerRef(owner, gvk)
	return metav1ac.OwnerReference().
		WithAPIVersion(ref.APIVersion).
		WithKind(ref.Kind).
		WithName(ref.Name).
		WithUID(ref.UID).
		WithController(*ref.Controller).
		WithBlockOwnerDeletion(*ref.BlockOwnerDeletion)
}
