package v1alpha1

import (
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ToV1beta1 converts a v1alpha1 Sandbox to the hub version: replicas 0 is
// operatingMode Suspended, anything else Running. Nothing is lost: every
// v1alpha1 field has a v1beta1 home.
func (in *Sandbox) ToV1beta1() *sandboxv1beta1.Sandbox {
	out := &sandboxv1beta1.Sandbox{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = sandboxv1beta1.GroupVersion.String(), "Sandbox"
	out.Spec.SandboxBlueprint = *in.Spec.SandboxBlueprint.DeepCopy()
	out.Spec.Lifecycle = *in.Spec.Lifecycle.DeepCopy()
	out.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeRunning
	if in.Spec.Replicas != nil && *in.Spec.Replicas == 0 {
		out.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	}
	out.Status = *in.Status.SandboxStatus.DeepCopy()
	return out
}

// SandboxFromV1beta1 converts a hub Sandbox to v1alpha1: operatingMode
// Suspended is replicas 0, Running (or unset) is 1; status.replicas counts
// the Pod (1 while the Sandbox reports a Pod selector).
func SandboxFromV1beta1(in *sandboxv1beta1.Sandbox) *Sandbox {
	out := &Sandbox{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = GroupVersion.String(), "Sandbox"
	out.Spec.SandboxBlueprint = *in.Spec.SandboxBlueprint.DeepCopy()
	out.Spec.Lifecycle = *in.Spec.Lifecycle.DeepCopy()
	replicas := int32(1)
	if in.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		replicas = 0
	}
	out.Spec.Replicas = &replicas
	out.Status.SandboxStatus = *in.Status.DeepCopy()
	if in.Status.LabelSelector != "" {
		out.Status.Replicas = 1
	}
	return out
}
