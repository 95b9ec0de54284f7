// Package v1beta1 contains the extensions API, group
// extensions.agents.x-k8s.io, version v1beta1: SandboxTemplate (a reusable
// Sandbox blueprint with its network policy), SandboxWarmPool (a pool of
// ready Sandboxes rendered from a template) and SandboxClaim (a request for a
// Sandbox, served warm from a pool or created cold), and the ownership
// helpers for them (owner.go: PoolOf, ClaimOf, IsPoolMember, IsClaimedBy).
//
// It must never import anything beyond k8s.io/apimachinery, k8s.io/api and
// the core api/v1beta1 package.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1beta1
