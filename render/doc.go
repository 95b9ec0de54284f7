// Package render holds pure functions that turn our objects into the objects
// the controller should hold in the cluster, as client-go apply
// configurations: Sandbox -> Pod, Service, PVCs; SandboxTemplate ->
// NetworkPolicy; SandboxClaim and SandboxWarmPool -> Sandboxes; and the status
// of each kind from what was observed.
//
// Everything observed from the cluster comes in through an inputs struct.
// Render must never use a client, the clock, randomness or global state, so
// every output is reproducible and golden-tested under golden/.
package render
