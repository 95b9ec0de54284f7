// Package render holds pure functions that turn our objects into the objects
// the controller should hold in the cluster, as client-go apply
// configurations: Sandbox -> Pod, Service, PVCs; SandboxTemplate ->
// NetworkPolicy; SandboxClaim and SandboxWarmPool -> Sandboxes; and the status
// of each kind from what was observed.
//
// For the Sandbox kind, PlanSandbox goes further and decides the whole
// reconcile as a Plan value (plan.go): the objects the policies judge, then
// ordered steps (apply, apply with force to adopt, delete with
// preconditions, the pod-name annotation patch, events, status), and any
// terminal problem. Adoption, a running Pod's frozen spec and its drift,
// objects in the way, fail-closed on several Pods and an expired Sandbox's
// deletion are decided there from the observed children, so the golden
// plan.yaml of each case shows what a change does to the cluster. The
// reconciler only executes plans; the other kinds will follow.
//
// Everything observed from the cluster comes in through an inputs struct.
// Render must never use a client, the clock, randomness or global state, so
// every output is reproducible and golden-tested under golden/.
package render
