package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ShutdownPolicy says what happens to a SandboxClaim when it expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the claim; its Sandbox follows through
	// garbage collection.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyDeleteForeground deletes the claim with foreground
	// propagation: the claim stays visible, with a deletionTimestamp, until its
	// Sandbox and Pod are gone.
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	// ShutdownPolicyRetain deletes the claim's Sandbox but keeps the claim,
	// which reports Ready=False with reason ClaimExpired.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle says when a SandboxClaim expires and what happens then. The claim
// expires at the earlier of shutdownTime and the Sandbox's Finished time plus
// ttlSecondsAfterFinished.
type Lifecycle struct {
	// shutdownTime is the time at which the claim expires. It is enforced by
	// the claim controller and not copied to the Sandbox.
	// +kubebuilder:validation:Format=date-time
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ttlSecondsAfterFinished is how long a claim is kept after its Sandbox
	// finished (the Finished condition's lastTransitionTime).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// shutdownPolicy is Delete, DeleteForeground or Retain (the default).
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxWarmPoolRef names a SandboxWarmPool in the claim's namespace.
type SandboxWarmPoolRef struct {
	// name of the SandboxWarmPool.
	// +required
	Name string `json:"name"`
}

// EnvVar is an environment variable a claim injects into its Sandbox.
type EnvVar struct {
	// name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Name string `json:"name"`

	// value of the variable.
	// +required
	Value string `json:"value"`

	// containerName is the container that gets the variable; the first
	// container of the template when empty.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// SandboxClaimSpec is a request for a Sandbox from a warm pool.
type SandboxClaimSpec struct {
	// warmPoolRef names the SandboxWarmPool to take a ready Sandbox from; the
	// pool's template is used to create one when the pool is empty. It cannot
	// be changed after the claim is created.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.warmPoolRef cannot be changed after the claim is created: restore the previous pool name, or delete this claim and create a new one for the other pool",reason=FieldValueForbidden
	WarmPoolRef SandboxWarmPoolRef `json:"warmPoolRef"`

	// lifecycle says when the claim expires and what happens then.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// additionalPodMetadata holds labels and annotations added to the claimed
	// Sandbox's Pod. Keys in reserved or system domains are rejected.
	// +optional
	AdditionalPodMetadata sandboxv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// env lists environment variables injected into the Sandbox, subject to
	// the template's envVarsInjectionPolicy. A claim with env always gets a
	// newly created (cold) Sandbox. A variable may be named once per container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self.all(e, self.exists_one(f, f.name == e.name && (has(f.containerName) ? f.containerName : '') == (has(e.containerName) ? e.containerName : '')))",message="spec.env sets the same variable more than once for one container: keep a single entry per name and containerName"
	Env []EnvVar `json:"env,omitempty"`

	// volumeClaimTemplates adds PVCs to the Sandbox, subject to the template's
	// volumeClaimTemplatesPolicy. A claim with volume claim templates always
	// gets a newly created (cold) Sandbox.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []sandboxv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// ClaimedSandbox identifies the Sandbox bound to a claim.
type ClaimedSandbox struct {
	// name of the Sandbox bound to the claim.
	// +optional
	Name string `json:"name,omitempty"`

	// podIPs of the Sandbox's Pod.
	// +optional
	// +listType=atomic
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus is the observed state of a SandboxClaim.
type SandboxClaimStatus struct {
	// conditions: Ready (the claim's own reasons, or the Sandbox's Ready
	// forwarded) and Finished (mirrored from the Sandbox).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// sandbox is the Sandbox bound to the claim.
	// +optional
	Sandbox ClaimedSandbox `json:"sandbox,omitempty"`
}

// SandboxClaim asks for a Sandbox: a ready one from a warm pool when possible
// (warm), otherwise one created from the pool's template (cold).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxclaim,categories=agent-sandbox
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.status.sandbox.name`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the request.
	// +required
	Spec SandboxClaimSpec `json:"spec"`

	// status is the observed state of the claim, written by the controller.
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList is a list of SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}
