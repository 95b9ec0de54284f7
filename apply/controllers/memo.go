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
