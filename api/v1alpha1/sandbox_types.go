package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// SandboxSpec is the desired state of a v1alpha1 Sandbox: v1beta1's, with
// replicas (0 or 1) in place of operatingMode.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="spec.volumeClaimTemplates: volumeClaimTemplates is immutable: it cannot be added, removed or changed after the Sandbox is created; restore the previous value, or create a new Sandbox with the volumes you need",reason=FieldValueForbidden,fieldPath=".volumeClaimTemplates"
type SandboxSpec struct {
	sandboxv1beta1.SandboxBlueprint `json:",inline"`

	sandboxv1beta1.Lifecycle `json:",inline"`

	// replicas is 1 to run the Sandbox's Pod and 0 to suspend it (v1beta1:
	// operatingMode Running / Suspended). A Sandbox is a singleton: it never
	// runs more than one Pod.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self <= 1",message="a Sandbox runs at most one Pod: spec.replicas must be 0 (suspended) or 1 (running)"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// SandboxStatus is v1beta1's status plus replicas, the number of Pods (0
// or 1), for the scale subresource.
type SandboxStatus struct {
	sandboxv1beta1.SandboxStatus `json:",inline"`

	// replicas is the number of Pods the Sandbox has (0 or 1).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// Sandbox (v1alpha1, deprecated: use v1beta1) is an isolated, stateful,
// singleton workload.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=sandbox,categories=agent-sandbox
// +kubebuilder:deprecatedversion:warning="agents.x-k8s.io/v1alpha1 Sandbox is deprecated; use agents.x-k8s.io/v1beta1 (spec.replicas becomes spec.operatingMode)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxSpec `json:"spec"`

	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of v1alpha1 Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
