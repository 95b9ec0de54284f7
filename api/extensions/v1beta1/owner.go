package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// The kinds of this group, as a controller reference names them: API group
// and kind, whatever the version.
var (
	TemplateKind = schema.GroupKind{Group: GroupName, Kind: "SandboxTemplate"}
	WarmPoolKind = schema.GroupKind{Group: GroupName, Kind: "SandboxWarmPool"}
	ClaimKind    = schema.GroupKind{Group: GroupName, Kind: "SandboxClaim"}
)

// PoolOf returns the controller reference of a warm pool's member: one
// naming a SandboxWarmPool of this API group, else nil. A reference of the
// same kind under another group names something else.
func PoolOf(sb metav1.Object) *metav1.OwnerReference {
	return sandboxv1beta1.ControllerOf(sb, WarmPoolKind)
}

// ClaimOf returns the controller reference of a claim's Sandbox: one
// naming a SandboxClaim of this API group, else nil.
func ClaimOf(sb metav1.Object) *metav1.OwnerReference {
	return sandboxv1beta1.ControllerOf(sb, ClaimKind)
}

// IsPoolMember reports whether pool controls obj (API group, kind, name
// and UID).
func IsPoolMember(obj metav1.Object, pool *SandboxWarmPool) bool {
	return sandboxv1beta1.IsControlledBy(obj, pool, WarmPoolKind)
}

// IsClaimedBy reports whether claim controls obj (API group, kind, name and
// UID).
func IsClaimedBy(obj metav1.Object, claim *SandboxClaim) bool {
	return sandboxv1beta1.IsControlledBy(obj, claim, ClaimKind)
}
