// Package apply is the effectful half of the controller: the server-side
// apply engine (diff against what our field manager owns, apply, prune, change
// sets) and the reconcilers that compose load -> render -> policy -> apply.
//
// It writes only with server-side apply under our field managers and must
// never overwrite fields another manager owns, nor delete a PVC except through
// its Sandbox's deletion.
package apply
