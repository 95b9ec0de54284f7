package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// NetworkPolicyManagement says whether the controller manages the template's
// shared NetworkPolicy.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

const (
	// NetworkPolicyManagementManaged: the controller keeps the NetworkPolicy
	// <template>-network-policy in place (the default).
	NetworkPolicyManagementManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyManagementUnmanaged: the controller creates no
	// NetworkPolicy; another system (a CNI's own policies, say) is in charge.
	NetworkPolicyManagementUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// InjectionPolicy says how far a SandboxClaim may change what a template
// defines (environment variables or volume claim templates).
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type InjectionPolicy string

const (
	// InjectionPolicyDisallowed: a claim that sets the field is rejected (the default).
	InjectionPolicyDisallowed InjectionPolicy = "Disallowed"
	// InjectionPolicyAllowed: a claim may add entries but not replace the template's.
	InjectionPolicyAllowed InjectionPolicy = "Allowed"
	// InjectionPolicyOverrides: a claim may add entries and replace the template's.
	InjectionPolicyOverrides InjectionPolicy = "Overrides"
)

// NetworkPolicySpec holds the rules of a template's NetworkPolicy. The pod
// selector and policy types are set by the controller.
type NetworkPolicySpec struct {
	// ingress rules; traffic into a sandbox is allowed if it matches one. An
	// empty list denies all ingress.
	// +optional
	// +listType=atomic
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// egress rules; traffic out of a sandbox is allowed if it matches one. An
	// empty list denies all egress.
	// +optional
	// +listType=atomic
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is a reusable Sandbox blueprint plus the policies that
// govern claims made against it.
//
// Its first three fields are those of the core SandboxBlueprint (see
// Blueprint); they are spelled out rather than embedded because
// controller-gen's apply configuration generator cannot follow an embedded
// struct from another package.
type SandboxTemplateSpec struct {
	// podTemplate describes the Pod of every Sandbox created from this
	// template. When automountServiceAccountToken is unset it is set to false.
	// +required
	PodTemplate sandboxv1beta1.PodTemplate `json:"podTemplate"`

	// volumeClaimTemplates lists the PVCs created for every Sandbox made from
	// this template, one per entry, named <template-name>-<sandbox>.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []sandboxv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// service controls the headless Service of every Sandbox made from this
	// template (see Sandbox spec.service).
	// +optional
	Service *bool `json:"service,omitempty"`

	// networkPolicy holds the rules of the shared NetworkPolicy
	// <template>-network-policy that selects every Pod created from this
	// template. When omitted (and management is Managed) a secure default
	// applies: ingress only from app=sandbox-router Pods in the controller's
	// namespace; egress to public addresses only (private, link-local and
	// metadata ranges are blocked) plus DNS to kube-dns.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// networkPolicyManagement is Managed (default) or Unmanaged; with
	// Unmanaged, networkPolicy is ignored and no NetworkPolicy is created.
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// envVarsInjectionPolicy says whether a SandboxClaim may set environment
	// variables: Disallowed (default) rejects claims with env, Allowed lets
	// them add variables the template does not define, Overrides lets them
	// also replace the template's values.
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy InjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// volumeClaimTemplatesPolicy says whether a SandboxClaim may set volume
	// claim templates, with the same values as envVarsInjectionPolicy.
	// +kubebuilder:default=Disallowed
	// +optional
	VolumeClaimTemplatesPolicy InjectionPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// SandboxTemplate is a reusable Sandbox blueprint that warm pools and claims
// render Sandboxes from.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxtemplate,categories=agent-sandbox
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="NetworkPolicy",type=string,JSONPath=`.spec.networkPolicyManagement`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the blueprint and its claim policies.
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

// Blueprint returns the part of the template that a Sandbox is rendered from.
// The result shares no memory with the template.
func (s *SandboxTemplateSpec) Blueprint() sandboxv1beta1.SandboxBlueprint {
	out := sandboxv1beta1.SandboxBlueprint{
		PodTemplate: *s.PodTemplate.DeepCopy(),
		Service:     s.Service,
	}
	if s.Service != nil {
		v := *s.Service
		out.Service = &v
	}
	for i := range s.VolumeClaimTemplates {
		out.VolumeClaimTemplates = append(out.VolumeClaimTemplates, *s.VolumeClaimTemplates[i].DeepCopy())
	}
	return out
}
