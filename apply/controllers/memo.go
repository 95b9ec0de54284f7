package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// objectMemo is a reconciler's memory of one thing per object: keyed by
// namespace and name, each value for one object (UID), typed by its use.
// Each reconciler keeps one per thing it remembers, in a struct whose
// forget drops them all when the object goes.
type objectMemo[V any] = ssa.Memo[types.NamespacedName, V]

// sent is a value this process wrote (an annotation, say) and when.
type sent struct {
	value string
	at    time.Time
}

// within reports that v was sent less than lag before now: a cache that
// has not shown it yet does not cause it again.
func (s sent) within(v string, now time.Time, lag time.Duration) bool {
	return s.value == v && now.Sub(s.at) < lag
}

// inNamespace matches the keys of objects in a namespace.
func inNamespace(namespace string) func(types.NamespacedName) bool {
	return func(k types.NamespacedName) bool { return k.Namespace == namespace }
}

// Remembered counts what the reconciler remembers of Sandboxes in a
// namespace: none once they are gone.
func (r *SandboxReconciler) Remembered(namespace string) int {
	in, m := inNamespace(namespace), &r.memory
	return m.status.Count(in) + m.podName.Count(in) + m.children.Count(in) + m.drift.Count(in)
}

// Remembered counts what the reconciler remembers of claims in a
// namespace: none once they are gone.
func (r *ClaimReconciler) Remembered(namespace string) int {
	in, m := inNamespace(namespace), &r.memory
	return m.status.Count(in) + m.binding.Count(in) + m.annotations.Count(in)
}

// Remembered counts what the reconciler remembers of pools in a
// namespace: none once they are gone.
func (r *WarmPoolReconciler) Remembered(namespace string) int {
	in, m := inNamespace(namespace), &r.memory
	return m.status.Count(in) + m.notProgressing.Count(in) + m.expected.Count(in) + m.deferredSince.Count(in) +
		m.statusHeldSince.Count(in)
}

// Remembered counts what the reconciler remembers of templates in a
// namespace: none once they are gone.
func (r *TemplateReconciler) Remembered(namespace string) int {
	return r.denied.Count(inNamespace(namespace))
}

// Remembered counts what the reconciler remembers of Sandboxes in a
// namespace: none once they are gone.
func (r *IdleReconciler) Remembered(namespace string) int {
	return r.warned.Count(inNamespace(namespace))
}
