package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodMetadata is the part of object metadata a user may set on a Pod that a
// Sandbox creates: labels and annotations only.
type PodMetadata struct {
	// labels are added to the Pod. Keys under agents.x-k8s.io/ and
	// extensions.agents.x-k8s.io/ are reserved for the controller and are not
	// copied. A label removed here is removed from the Pod as well.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the Pod, with the same reserved prefixes as labels.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the metadata a user may set on an object the
// controller creates from a template: its name, labels and annotations.
type EmbeddedObjectMetadata struct {
	// name of the template. For a volume claim template the PVC is named
	// <name>-<sandbox>, and a Pod volume with this name is replaced by the PVC.
	// +optional
	Name string `json:"name,omitempty"`

	// labels added to the created object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to the created object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the single Pod that backs a Sandbox.
type PodTemplate struct {
	// metadata holds the labels and annotations given to the Pod. Other
	// metadata fields are ignored.
	// +optional
	ObjectMeta PodMetadata `json:"metadata,omitempty"`

	// spec is the Pod's spec. A change to it does not restart a running Pod
	// (Pods are mostly immutable); it takes effect the next time the Pod is
	// created, for example after a suspend and resume. The controller reports
	// the drift in the meantime.
	// +required
	Spec corev1.PodSpec `json:"spec"`
}

// PersistentVolumeClaimTemplate describes a PVC created for a Sandbox.
type PersistentVolumeClaimTemplate struct {
	// metadata of the claim; name is required in practice: the PVC is named
	// <name>-<sandbox> and mounted as the Pod volume called <name>.
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is the PVC's spec (access modes, storage class, requested size).
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxOperatingMode is the state a user asks a Sandbox to be in.
// +kubebuilder:validation:Enum=Running;Suspended
type SandboxOperatingMode string

const (
	// SandboxOperatingModeRunning keeps the Sandbox's Pod running.
	SandboxOperatingModeRunning SandboxOperatingMode = "Running"
	// SandboxOperatingModeSuspended deletes the Sandbox's Pod but keeps its
	// Service and PVCs, so it can be resumed later with its data.
	SandboxOperatingModeSuspended SandboxOperatingMode = "Suspended"
)

// ShutdownPolicy says what happens to an expired Sandbox.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox (and, through garbage
	// collection, its PVCs) when it expires.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps the expired Sandbox and its PVCs; only the Pod
	// and the Service are removed.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// SandboxBlueprint is the workload description shared by Sandbox and
// SandboxTemplate.
type SandboxBlueprint struct {
	// podTemplate describes the Pod that runs the Sandbox. When the Sandbox is
	// created from a SandboxTemplate (by a SandboxClaim or a SandboxWarmPool)
	// and automountServiceAccountToken is unset, it is set to false.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates lists the PVCs created for the Sandbox, one per entry,
	// named <template-name>-<sandbox>. They outlive suspend, resume and expiry
	// and are deleted only with the Sandbox. The list is replaced as a whole and
	// cannot be changed, added or removed after the Sandbox is created.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service controls the headless Service named after the Sandbox: true
	// creates and keeps it, false deletes the one the controller owns, and
	// unset creates none but keeps and reports one that already exists.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// Lifecycle says when a Sandbox expires and what happens then.
type Lifecycle struct {
	// shutdownTime is the time at which the Sandbox expires: its Pod and
	// Service are deleted and Ready becomes False with reason SandboxExpired.
	// +kubebuilder:validation:Format=date-time
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// shutdownPolicy decides whether the expired Sandbox object is deleted
	// (Delete) or kept with its PVCs (Retain, the default).
	// +kubebuilder:default=Retain
	// +optional
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxSpec is the desired state of a Sandbox.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="spec.volumeClaimTemplates: volumeClaimTemplates is immutable: it cannot be added, removed or changed after the Sandbox is created; restore the previous value, or create a new Sandbox with the volumes you need",reason=FieldValueForbidden,fieldPath=".volumeClaimTemplates"
type SandboxSpec struct {
	SandboxBlueprint `json:",inline"`

	Lifecycle `json:",inline"`

	// operatingMode is the state the Sandbox should be in. Running (the
	// default) keeps one Pod running. Suspended deletes the Pod but keeps the
	// Service and PVCs; setting Running again recreates the Pod on the same
	// volumes, so data written to them survives.
	// +kubebuilder:default=Running
	// +optional
	OperatingMode SandboxOperatingMode `json:"operatingMode,omitempty"`
}

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// serviceFQDN is the DNS name of the Sandbox's Service,
	// <service>.<namespace>.svc.<cluster-domain>.
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// service is the name of the Sandbox's Service.
	// +optional
	Service string `json:"service,omitempty"`

	// conditions: Ready, Suspended, PodScheduled and Finished.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// selector is the label selector of the Sandbox's Pod, set while it exists.
	// +optional
	LabelSelector string `json:"selector,omitempty"`

	// podIPs are the IP addresses of the Sandbox's Pod (two in dual-stack clusters).
	// +optional
	// +listType=atomic
	PodIPs []string `json:"podIPs,omitempty"`

	// nodeName is the node the Sandbox's Pod runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// Sandbox is an isolated, stateful, singleton workload: one Pod with a stable
// name and hostname, an optional headless Service, and PVCs that survive
// suspend and resume.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandbox,categories=agent-sandbox
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sandbox struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Sandbox.
	// +required
	Spec SandboxSpec `json:"spec"`

	// status is the observed state of the Sandbox, written by the controller.
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
