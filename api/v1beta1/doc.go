// Package v1beta1 contains the Sandbox API, group agents.x-k8s.io, version
// v1beta1: a singleton, stateful workload with a stable identity (one Pod, an
// optional headless Service and persistent volume claims).
//
// The package also exports the label, annotation, condition and reason strings
// that make up the observable API, so that controllers, webhooks, the CLI and
// users' tooling share one spelling, and the ownership helpers (owner.go:
// IsControlledBy, ControllerOf, ControllerKey) that decide whether an object
// belongs to another by API group, kind, name and UID, never by the kind or
// the UID alone, and AppliedAt, when a field manager last applied. It must never import anything beyond
// k8s.io/apimachinery and k8s.io/api.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=agents.x-k8s.io
package v1beta1
