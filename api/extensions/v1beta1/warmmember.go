package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IsUnclaimedWarmMember reports whether a Sandbox is a warm-pool member no
// claim has taken yet: its controller is a SandboxWarmPool of this API
// group (PoolOf), or it still carries the pool label (a claim that takes a
// member moves the controller reference to itself and drops the label in
// one write, as upstream does). Such a Sandbox is never routed to, resumed
// or idle-suspended.
func IsUnclaimedWarmMember(sb metav1.Object) bool {
	return sb.GetLabels()[sandboxv1beta1.LabelWarmPoolSandbox] != "" || PoolOf(sb) != nil
}
