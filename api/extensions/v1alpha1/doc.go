// Package v1alpha1 is the deprecated first version of the extension API
// (SandboxTemplate, SandboxClaim, SandboxWarmPool), served so that older
// manifests apply unchanged. v1beta1 is the hub and storage version; this
// package holds the types and the pure, lossless conversion functions: what
// one version cannot hold is kept in annotations under api.agents.x-k8s.io/.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=false
// +groupName=extensions.agents.x-k8s.io
package v1alpha1
