// Package render holds pure functions that turn our objects into the objects
// the controller should hold in the cluster, as client-go apply
// configurations (a Sandbox's Pod, Service and PVCs, and its namespace's
// default-deny NetworkPolicy; a template's NetworkPolicy; the Sandboxes of
// pools and claims; each kind's status), and that decide reconciles as Plan
// values (plan.go): the objects the policies judge, then ordered steps
// (apply, create, adopt, guarded delete, annotate, events, status), any
// terminal problem and when to look again. PlanSandbox, PlanTemplate,
// PlanWarmPool and PlanClaim decide each kind's; SandboxObjects is the one
// listing of a Sandbox's children that the plans, the webhook and the CLI
// (through render/preview) share.
//
// Rules:
//   - Render never uses a client, the clock, randomness or global state:
//     everything observed comes in through an inputs struct, so every output
//     is reproducible and golden-tested under golden/ (plan.yaml shows what a
//     change does to the cluster).
//   - Every delete a plan makes is guarded by preconditions: the UID, and
//     the resourceVersion too where a change since the decision must win
//     (an expired Sandbox); a plan never deletes a Sandbox a claim took.
//   - Ownership is API group, kind, name and UID (api/v1beta1.IsControlledBy
//     and the helpers built on it), never the kind or the UID alone, nor a
//     field manager's name; selectors also match a collision-free label
//     (SandboxSelector), not only upstream's name hash.
package render
