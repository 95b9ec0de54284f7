package controllers

import (
	"maps"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ownEcho filters the Sandbox's own update events: one whose only change
// is the status this process wrote last is not reconciled. The reconcile
// that wrote it planned with that status already (the status memory stands
// in for the cache until it shows the write), and every other change comes
// with an event of its own: to the Sandbox (a new resourceVersion, which
// this filter lets through) or to what it controls (their watches). That
// was one reconcile in about six of each Sandbox's suspend and resume.
func (r *SandboxReconciler) ownEcho() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !r.isOwnEcho(e.ObjectOld, e.ObjectNew)
	}}
}

// isOwnEcho reports an update from old to updated that only our last
// status write made: updated has the resourceVersion that write got, and
// nothing but status changed since old (a relist can fold several changes
// into one event: a spec, label, annotation, finalizer, owner or deletion
// change folded in with ours is reconciled). The engine is told the cache
// shows our write (ssa Seen), as a reconcile would have told it.
func (r *SandboxReconciler) isOwnEcho(old, updated client.Object) bool {
	prev, ok := old.(*sandboxv1beta1.Sandbox)
	sb, ok2 := updated.(*sandboxv1beta1.Sandbox)
	if !ok || !ok2 {
		return false
	}
	rec, ok := sandboxStatus.recall(&r.memory.status, sb)
	if !ok || rec.resourceVersion == "" || rec.resourceVersion != sb.ResourceVersion || !onlyStatusChanged(prev, sb) {
		return false
	}
	r.Engine.Seen("Sandbox", sb)
	return true
}

// onlyStatusChanged reports that b differs from a in nothing a plan reads
// but status: the same object, generation (spec), labels, annotations,
// finalizers, owners and deletion.
func onlyStatusChanged(a, b *sandboxv1beta1.Sandbox) bool {
	return a.UID == b.UID && a.Generation == b.Generation &&
		a.DeletionTimestamp.Equal(b.DeletionTimestamp) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		slices.Equal(a.Finalizers, b.Finalizers) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences)
}
