// Package controllers holds the reconcilers of Sandbox, SandboxTemplate,
// SandboxWarmPool and SandboxClaim, and idle suspend. Each one observes
// (reads its inputs from the manager's cache), plans (one render.Plan* call
// decides every change), has the plan's objects judged by the policies, and
// hands the plan to the executor (executor.go), the one interpreter of
// plans, which runs its steps in order through the ssa engine; it handles
// only what execution returns (a conflict: plan again; a denial, a refused
// adoption, a member a claim holds: an input of the next plan). A write
// whose answer was lost (outcomeUnknown) is read back before anything is
// decided on it. All run in one skeleton (skeleton.go), with one status writer
// (status.go) and typed memories per object and UID (memo.go).
//
// Rules:
//   - Every decision about the cluster is the plan's; a reconciler never
//     edits a plan or writes around it. It may only put off when a step
//     runs: a pool's refill while claims take members (refillWait), its
//     counts while it refills (statusHold), a claimed Sandbox's writes
//     until its claim is Ready (awaitClaimCommit). A Sandbox put off for
//     its claim or a burst of claims is parked in the WarmQueue, which
//     wakes it when the claim's or the burst's events say it may go on;
//     time only bounds the wait.
//   - Every delete carries UID and resourceVersion preconditions; a
//     PersistentVolumeClaim is never deleted (garbage collection does it,
//     with its Sandbox), and a Sandbox a claim has taken is never deleted by
//     its former pool (pools and claims meet in the WarmQueue).
//   - A field another manager owns is never changed, but for what the user
//     asks: idle suspend takes spec.operatingMode under its own field
//     manager, guarded by UID and resourceVersion.
//   - A failure only a change can fix is reported in status or an event and
//     returned as reconcile.TerminalError (not retried, not logged as an
//     error); expected failures are retried quietly with backoff.
//   - The cache keeps only what is read (CacheOptions, OwnManagers), and
//     the objects a reconciler reads in bulk on every claim, a pool's
//     members, are read from the informer's index uncopied
//     (controlledSandboxes): the cache's own, never changed.
//   - An event is reconciled only when it may change a plan: what an
//     object controls maps to it by its controller reference
//     (enqueueController, sandboxOfChild: no REST mapping per event), and
//     the echo of our own Sandbox status write is not reconciled (ownEcho).
//
// The user's guide is docs/controller.md.
package controllers
