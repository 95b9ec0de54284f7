package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// SandboxTemplateSpec is v1beta1's without volumeClaimTemplatesPolicy.
type SandboxTemplateSpec struct {
	// podTemplate is the Pod every Sandbox made from this template runs.
	PodTemplate sandboxv1beta1.PodTemplate `json:"podTemplate"`
	// volumeClaimTemplates are the PVCs of every Sandbox made from this template.
	// +listType=atomic
	// +optional
	VolumeClaimTemplates []sandboxv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	// service asks for a headless Service per Sandbox.
	// +optional
	Service *bool `json:"service,omitempty"`
	// networkPolicy is the template's NetworkPolicy rules.
	// +optional
	NetworkPolicy *extv1beta1.NetworkPolicySpec `json:"networkPolicy,omitempty"`
	// networkPolicyManagement: Managed (default) or Unmanaged.
	// +kubebuilder:default=Managed
	// +optional
	NetworkPolicyManagement extv1beta1.NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`
	// envVarsInjectionPolicy: Disallowed (default), Allowed or Overrides.
	// +kubebuilder:default=Disallowed
	// +optional
	EnvVarsInjectionPolicy extv1beta1.InjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`
}

// SandboxTemplate (v1alpha1, deprecated: use v1beta1).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxtemplate,categories=agent-sandbox
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate is deprecated; use extensions.agents.x-k8s.io/v1beta1"
type SandboxTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of v1alpha1 SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

// Values of spec.warmpool.
const (
	WarmPoolNone    = "none"
	WarmPoolDefault = "default"
)

// SandboxClaimSpec names a template and, through warmpool, a pool (v1beta1
// names the pool only: warmPoolRef).
type SandboxClaimSpec struct {
	// sandboxTemplateRef names the SandboxTemplate the claim's Sandbox is made from.
	// +optional
	SandboxTemplateRef *extv1beta1.SandboxTemplateRef `json:"sandboxTemplateRef,omitempty"`
	// warmpool is "none", "default" (the default) or the name of a
	// SandboxWarmPool. A pool name becomes v1beta1 warmPoolRef.name; none and
	// default become the pool shadow-pool-<template>.
	// +kubebuilder:default=default
	// +optional
	WarmPool string `json:"warmpool,omitempty"`
	// +optional
	Lifecycle *extv1beta1.Lifecycle `json:"lifecycle,omitempty"`
	// +optional
	AdditionalPodMetadata sandboxv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty"`
	// +listType=atomic
	// +optional
	Env []extv1beta1.EnvVar `json:"env,omitempty"`
	// +listType=atomic
	// +optional
	VolumeClaimTemplates []sandboxv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

// SandboxClaim (v1alpha1, deprecated: use v1beta1).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sandboxclaim,categories=agent-sandbox
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxClaim is deprecated; use extensions.agents.x-k8s.io/v1beta1 (sandboxTemplateRef and warmpool become warmPoolRef)"
type SandboxClaim struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec SandboxClaimSpec `json:"spec"`
	// +optional
	Status extv1beta1.SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList is a list of v1alpha1 SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

// SandboxWarmPoolSpec has a plain replicas (v1beta1: a pointer).
type SandboxWarmPoolSpec struct {
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas"`
	// +required
	TemplateRef extv1beta1.SandboxTemplateRef `json:"sandboxTemplateRef"`
	// +optional
	UpdateStrategy *extv1beta1.UpdateStrategy `json:"updateStrategy,omitempty"`
}

// SandboxWarmPool (v1alpha1, deprecated: use v1beta1).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=swp,categories=agent-sandbox
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxWarmPool is deprecated; use extensions.agents.x-k8s.io/v1beta1"
type SandboxWarmPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`
	// +optional
	Status extv1beta1.SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of v1alpha1 SandboxWarmPools.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}
