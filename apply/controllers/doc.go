// Package controllers holds the reconcilers: each reads its inputs from the
// manager's cache, renders the desired objects with package render, and
// writes only through the ssa engine. The Sandbox reconciler is
// observe -> render.PlanSandbox -> policy -> execute: it classifies what it
// observes (which Pod and Service are the Sandbox's, adoptable or in the
// way, what our field manager owns of the Pod), leaves every decision about
// the cluster to the plan, checks the plan's objects against the policies,
// and carries out its steps in order (execute, one small executor over the
// engine). What depends on carrying them out stays with it: API errors and
// conflicts, policy denials, its memory of what it last wrote, and the
// status write coalescing window. Reconcilers never delete a
// PersistentVolumeClaim (garbage collection does, with its Sandbox) and never
// change a field another field manager owns, with one exception the user
// asks for: idle suspend (IdleReconciler, on Sandboxes annotated
// agents.x-k8s.io/idle-timeout) takes spec.operatingMode, and nothing else,
// under its own field manager, guarded by UID and resourceVersion. A warm
// pool and its claims meet in the WarmQueue: a claim takes a member from it,
// a pool withdraws a member from it before deleting it, and the Sandbox
// deletes of pools and claims carry UID and resourceVersion preconditions,
// so a Sandbox a claim has taken is never deleted by its former pool.
package controllers
