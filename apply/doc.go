// Package apply is the effectful half of the controller: the server-side
// apply engine (diff against what our field manager owns, apply, prune, change
// sets), the reconcilers that compose load -> render -> policy -> apply, and
// the defaults they render with as the cluster gives them (runtimeclass), and
// the gate that holds Events while the controller writes (eventgate).
//
// It writes only with server-side apply under our field managers and must
// never overwrite fields another manager owns, nor delete a PVC except through
// its Sandbox's deletion.
package apply
