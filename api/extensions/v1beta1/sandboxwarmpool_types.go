package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateRef names a SandboxTemplate in the same namespace.
type SandboxTemplateRef struct {
	// name of the SandboxTemplate.
	// +required
	Name string `json:"name"`
}

// UpdateStrategyType says how a warm pool treats members rendered from an
// older version of its template.
// +kubebuilder:validation:Enum=OnReplenish;Recreate
type UpdateStrategyType string

const (
	// UpdateStrategyOnReplenish keeps stale members until they are claimed or
	// deleted; their replacements use the new template (the default).
	UpdateStrategyOnReplenish UpdateStrategyType = "OnReplenish"
	// UpdateStrategyRecreate replaces stale unclaimed members right away.
	// Only changes to the Pod spec make a member stale; label and annotation
	// edits do not.
	UpdateStrategyRecreate UpdateStrategyType = "Recreate"
)

// UpdateStrategy of a warm pool.
type UpdateStrategy struct {
	// type is OnReplenish (default) or Recreate.
	// +kubebuilder:default=OnReplenish
	// +optional
	Type UpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec is the desired state of a warm pool.
type SandboxWarmPoolSpec struct {
	// replicas is the number of ready, unclaimed Sandboxes to keep. It is the
	// scale subresource's spec field, so kubectl scale and an HPA can set it.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// sandboxTemplateRef names the SandboxTemplate that members are rendered from.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.name != ''",message="spec.sandboxTemplateRef.name is empty: set it to the name of a SandboxTemplate in this namespace",reason=FieldValueRequired
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// updateStrategy says how members rendered from an older template are
	// replaced.
	// +kubebuilder:default={type: OnReplenish}
	// +optional
	UpdateStrategy *UpdateStrategy `json:"updateStrategy,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a warm pool.
type SandboxWarmPoolStatus struct {
	// replicas is the number of members in the pool.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of members whose Sandbox is Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector of the pool's members (for the scale
	// subresource and HPAs).
	// +optional
	Selector string `json:"selector,omitempty"`

	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions report whether the pool is full of Ready members (Ready)
	// and whether its members make progress towards Ready (Progressing).
	// An addition of this controller; the public API has no pool conditions.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxWarmPool keeps a number of ready Sandboxes, rendered from a
// SandboxTemplate, for SandboxClaims to take.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=swp,categories=agent-sandbox
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxWarmPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`

	// status is the observed state of the pool, written by the controller.
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}
