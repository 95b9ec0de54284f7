// Package preview renders what one of our objects stands for before it
// exists: the Pod, Service and PVCs of a Sandbox; the NetworkPolicy and a
// member of a SandboxTemplate; the members of a SandboxWarmPool; the
// Sandbox of a SandboxClaim. It is the one such rendering the admission
// webhook (which judges it) and the CLI (which prints and judges it)
// share, built on render's pure functions, with the controller's defaults.
//
// The pool or template an object refers to comes through a Lookup the
// caller gives (the manifests, a cache, a cluster); preview itself never
// uses a client, the clock or randomness, and never changes its inputs.
package preview
