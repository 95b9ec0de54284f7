// Package v1alpha1 is the deprecated first version of the Sandbox API,
// served so that older manifests (and the public project's quick start) apply
// unchanged. v1beta1 is the hub and storage version; this package holds the
// types and the pure conversion functions to and from v1beta1. It must
// import nothing but API machinery and our other API packages.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=false
// +groupName=agents.x-k8s.io
package v1alpha1
