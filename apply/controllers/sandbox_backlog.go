package controllers

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// busyBacklog is how many Sandboxes may wait for a deferred transitional
// status before the controller counts as busy (a burst of creates, suspends
// or resumes), and busyFactor how much longer the coalescing window is
// then. In a burst the API server is the bottleneck: a transitional status
// (a Pod still starting) is a refresh that competes with the first writes of
// the Sandboxes behind it, and most Pods become Ready within the longer
// window, so each Sandbox costs one status write instead of two. Resting
// statuses (Ready, suspended, failed) are never deferred.
const (
	busyBacklog = 50
	busyFactor  = 3
)

// statusBacklog counts the Sandboxes whose transitional status is deferred
// right now.
type statusBacklog struct {
	waiting sync.Map // types.NamespacedName -> struct{}
	n       atomic.Int64
}

// wait records that the status of the Sandbox key is deferred.
func (b *statusBacklog) wait(key types.NamespacedName) {
	if _, had := b.waiting.LoadOrStore(key, struct{}{}); !had {
		b.n.Add(1)
	}
}

// done records that the status of the Sandbox key is written now, or that
// the Sandbox is gone.
func (b *statusBacklog) done(key types.NamespacedName) {
	if _, had := b.waiting.LoadAndDelete(key); had {
		b.n.Add(-1)
	}
}

// window is the coalescing window for the current backlog.
func (b *statusBacklog) window(base time.Duration) time.Duration {
	if b.n.Load() > busyBacklog {
		return busyFactor * base
	}
	return base
}
