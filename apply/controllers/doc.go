// Package controllers holds the reconcilers: each reads its inputs from the
// manager's cache, renders the desired objects with package render, and
// writes only through the ssa engine. Reconcilers never delete a
// PersistentVolumeClaim (garbage collection does, with its Sandbox) and never
// change a field another field manager owns.
package controllers
