// Package controllers holds the reconcilers: each reads its inputs from the
// manager's cache, renders the desired objects with package render, and
// writes only through the ssa engine. Reconcilers never delete a
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
