package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IsUnclaimedWarmMember reports whether a Sandbox is a warm-pool member no
// claim has taken yet: its controller is a SandboxWarmPool, or it still
// carries the pool label (a claim that takes a member moves the controller
// reference to itself and drops the label in one write, as upstream does).
// Such a Sandbox is never routed to, resumed or idle-suspended.
func IsUnclaimedWarmMember(sb metav1.Object) bool {
	if sb.GetLabels()[sandboxv1beta1.LabelWarmPoolSandbox] != "" {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil || ref.Kind != "SandboxWarmPool" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err != nil || gv.Group == GroupName
}
