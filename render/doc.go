// Package render holds pure functions that turn our objects into the objects
// the controller should hold in the cluster, as client-go apply
// configurations: Sandbox -> Pod, Service, PVCs and, for a Sandbox not made
// from a template (or that outlived it), its own default-deny NetworkPolicy; SandboxTemplate ->
// NetworkPolicy; SandboxClaim and SandboxWarmPool -> Sandboxes; and the status
// of each kind from what was observed. SandboxObjects renders a Sandbox and
// lists its children (Pod, Service, PVCs): the one listing the controller's
// plans, the admission webhook and the CLI share (the latter two through
// render/preview, which renders what any of our objects stands for).
//
// Reconciles are decided here as Plan values (plan.go): the objects the
// policies judge, then ordered steps (apply, apply with force to adopt,
// create, adopt with an apply guarded by resourceVersion, delete with
// preconditions, annotate, events, status), any terminal problem and when
// to look again. PlanSandbox decides a Sandbox's: adoption, a running Pod's
// frozen spec and its drift, objects in the way, fail-closed on several
// Pods and an expired Sandbox's deletion; its NetworkPolicy goes before
// its Pod. Every selector of a Sandbox's Pod the plans write matches the
// Sandbox's UID as well as upstream's name hash (SandboxSelector), which
// collides. PlanWarmPool decides a pool's:
// which members to delete and why (stale under Recreate, the excess, not
// Ready and newest first; each guarded by UID and resourceVersion; never a
// Sandbox a claim took), which to create, the status and progress events
// (warmPoolReport; members a claim holds, Held, are left alone and looked at
// again shortly). PlanTemplate decides a template's: the refusal event
// for the Sandboxes it makes, its label, and its NetworkPolicy. PlanClaim
// is a claim's one planner, every phase in it: for an unbound claim the
// warm-or-cold choice (a member the queue offers that the pool is not
// deleting, adopted under its resourceVersion, else the claim's own Sandbox
// created from the template), what the policies judge, and the binding's
// commit after it (the annotations, then the status naming the Sandbox,
// both guarded by the claim's resourceVersion), or the rejection (the
// annotations, then the status); made again as the commit alone
// (Committing) when the commit conflicted, which, when another controller
// bound the claim first (ClaimBoundTo), is the guarded delete of the
// Sandbox bound here; for a rejection the API server's answer made
// (Rejected), its report; for a bound claim the removal of a second
// Sandbox a concurrent controller bound it to (guarded by UID and
// resourceVersion; never the bound one), its status, then its annotations;
// for an expired one what its shutdownPolicy deletes. A policy denial or a
// refusal comes back as an input and the plan is made again. The golden plan.yaml of each case
// shows what a change does to the cluster; the reconcilers only execute
// plans.
//
// Controller references are apimachinery's metav1.NewControllerRef
// (controllerRef, owner.go, for apply configurations). Whether an object
// belongs to a Sandbox, pool, claim or template is decided by API group,
// kind, name and UID (api/v1beta1.IsControlledBy and the helpers built on
// it), never by the kind or the UID alone, nor by a field manager's name.
//
// Everything observed from the cluster comes in through an inputs struct.
// Render must never use a client, the clock, randomness or global state, so
// every output is reproducible and golden-tested under golden/.
package render
