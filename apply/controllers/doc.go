// Package controllers holds the reconcilers: each reads its inputs from the
// manager's cache, renders the desired objects with package render, and
// writes only through the ssa engine. The Sandbox, SandboxWarmPool,
// SandboxTemplate and SandboxClaim reconcilers are observe -> plan (one
// planner per kind: render.PlanSandbox, render.PlanWarmPool,
// render.PlanTemplate, render.PlanClaim) -> policy -> execute: they
// classify what they observe, leave every decision about the cluster to
// the plan (a policy denial goes back into it, and it is made again),
// check the plan's objects against the policies, and hand the plan to the
// executor (executor.go), the one interpreter of plans: it runs the steps
// in order (a run of create steps, independent of each other, a bounded
// number at a time), stops at the first that fails, and calls the
// reconciler's hooks for events, status and the steps whose requests its
// memory may spare.
// A plan is never edited while it runs: what execution returns (a
// conflict, a refusal, a member a claim holds) goes back to the planner as
// its input, and the plan is made again. What depends on carrying a plan
// out stays with the reconciler: API errors and conflicts, its memory of
// what it last wrote and reported, the status write coalescing window
// (longer while many Sandboxes wait, in a burst), and for a pool the
// expectations of members created and deleted moments ago, a member
// renamed when its name is taken, putting off refills while claims take members, and withdrawing
// the members it deletes from the claim queue first (those a claim holds
// are planned again as held); for a claim, taking members from the queue
// and returning them, what it remembers of its binding, a conflicting
// adoption planned again or the next member tried, a refused one made a
// cold start, a member whose running Pod the policies deny passed over and
// deleted (UID and resourceVersion preconditions) for its pool to
// replace, and for the binding's commit (the end of an unbound claim's
// plan: annotations, then status, guarded by the claim's resourceVersion)
// the resourceVersion the annotations' write leaves carried on to the
// status, and on a conflict the claim read again and the commit planned
// again (which, when another controller bound the claim first, deletes
// the Sandbox bound here).
// Every reconciler runs in one skeleton (skeleton.go): read the object
// from the cache, forget what it remembers of one that is gone, leave
// alone one being deleted or in a namespace being deleted (each kind says
// which: idle suspend looks at Sandboxes being deleted all the same), run
// its own work, and retry expected, passing failures quietly with backoff.
// A failure only a change can fix (a policy denial, a field conflict, an
// invalid object or annotation, a claim's rejection) is reported in status
// or an event and returned as reconcile.TerminalError: the skeleton does
// not retry it and does not log it as an error. Status is written by one
// status writer (status.go), which skips what this process wrote last and
// remembers what it wrote. Each reconciler's memory of what it wrote and
// reported (status, the pod-name annotation, events reported once, a
// claim's binding) is a typed ssa.Memo per thing remembered, keyed by
// object and UID (memo.go), all forgotten when the object goes.
// The Sandbox reconciler keeps a default-deny NetworkPolicy for every
// Sandbox not made from a template (render.PlanSandbox decides it) and
// watches NetworkPolicies for that; the template reconciler watches Pods
// that lack a template's collision-free label, whose template's policy
// selects on the ref hash alone until none is left.
// Reconcilers never delete a PersistentVolumeClaim (garbage collection
// does, with its Sandbox) and never change a field another field manager owns, with one exception the user
// asks for: idle suspend (IdleReconciler, on Sandboxes annotated
// agents.x-k8s.io/idle-timeout) takes spec.operatingMode, and nothing else,
// under its own field manager, guarded by UID and resourceVersion. A warm
// pool and its claims meet in the WarmQueue: a claim takes a member from it,
// a pool withdraws a member from it before deleting it, and the Sandbox
// deletes of pools and claims carry UID and resourceVersion preconditions,
// so a Sandbox a claim has taken is never deleted by its former pool.
// The cache (CacheOptions) keeps Pods unrelated to Sandboxes as bare
// metadata, and of Sandboxes, their Pods and Services, and claims only the
// managedFields entries of the controller's own managers (OwnManagers), the
// only ones read: an ownership upgrade, which rewrites the whole list, is
// made from an object read past the cache.
//
// With ClaimReconciler.Tracer set (the controller's --otlp-endpoint), each
// claim reconcile is a span continuing the claim's trace-context annotation
// (bounded, and ignored unless it parses), and the Sandbox a claim
// cold-starts carries the span's context in that annotation; with it nil,
// nothing is read, traced or written for tracing.
package controllers
