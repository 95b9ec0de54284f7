package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// SandboxKind is the Sandbox's API group and kind: what a controller
// reference to a Sandbox names (its Pod, Service and PVCs).
var SandboxKind = schema.GroupKind{Group: GroupName, Kind: "Sandbox"}

// RefersTo reports whether ref names an object of kind gk: its API group
// (from apiVersion, whatever the version) and its kind. A reference whose
// apiVersion cannot be parsed names nothing.
func RefersTo(ref metav1.OwnerReference, gk schema.GroupKind) bool {
	if ref.Kind != gk.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gk.Group
}

// ControllerOf returns obj's controller reference when it names an object
// of kind gk (API group and kind), else nil. It does not copy the reference.
func ControllerOf(obj metav1.Object, gk schema.GroupKind) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || !RefersTo(*ref, gk) {
		return nil
	}
	return ref
}

// IsControlledBy reports whether owner, an object of kind gk, is obj's
// controller: the controller reference names owner's API group, kind, name
// and UID, and both live in the same namespace (owner references never
// cross namespaces). apimachinery's metav1.IsControlledBy compares the UID
// alone, and anyone who can read an object can copy its UID into a
// reference of another group or kind: ownership is decided here instead.
func IsControlledBy(obj, owner metav1.Object, gk schema.GroupKind) bool {
	ref := ControllerOf(obj, gk)
	return ref != nil && ref.Name == owner.GetName() && ref.UID == owner.GetUID() &&
		(owner.GetNamespace() == "" || owner.GetNamespace() == obj.GetNamespace())
}

// ControllerKey is the key that identifies a controller reference to an
// object of kind gk, named name, with uid: API group, kind, name and UID.
// Indexes of objects by their controller are keyed by it.
func ControllerKey(gk schema.GroupKind, name string, uid types.UID) string {
	return gk.Group + "/" + gk.Kind + "/" + name + "/" + string(uid)
}

// ControllerKeyOf is ControllerKey for obj's controller reference, and ""
// when obj has none (or one whose apiVersion cannot be parsed).
func ControllerKeyOf(obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ""
	}
	return ControllerKey(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, ref.Name, ref.UID)
}

// AppliedAt is when manager last applied to obj's main resource (not a
// subresource), from its managedFields entry (whole seconds): the time of
// the last apply by that manager that changed what it owns. False when
// manager holds nothing of the object.
func AppliedAt(obj metav1.Object, manager string) (time.Time, bool) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.Time != nil {
			return e.Time.Time, true
		}
	}
	return time.Time{}, false
}
