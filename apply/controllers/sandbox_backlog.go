package controllers

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// busyBacklog is how many Sandboxes may wait for a deferred transitional
// status before the controller counts as busy (a burst of creates, suspends
// or resumes). In a burst the API server is the bottleneck: a transitional
// status (a Pod still starting or terminating) is a refresh that competes
// with the writes of the Sandboxes behind it, and it would be overwritten
// by the resting status moments later. So while busy, a transitional status
// is held until the burst is over, but never longer than busyHold windows
// after our last write for the Sandbox (a Pod stuck in Pending is still
// reported), and it is looked at again every busyFactor windows. The burst
// counts as over busyFactor windows after the backlog fell to busyBacklog,
// so that its tail is not written either. Resting statuses (Ready,
// suspended, failed) are never deferred.
const (
	busyBacklog = 50
	busyFactor  = 3
	busyHold    = 24
)

// statusBacklog counts the Sandboxes whose transitional status is deferred
// right now, and remembers when there were many.
type statusBacklog struct {
	waiting sync.Map // types.NamespacedName -> struct{}
	n       atomic.Int64
	// busyAt is when the backlog was last seen above busyBacklog (unix
	// nanoseconds), zero if never.
	busyAt atomic.Int64
}

// wait records that the status of the Sandbox key is deferred at now.
func (b *statusBacklog) wait(key types.NamespacedName, now time.Time) {
	if _, had := b.waiting.LoadOrStore(key, struct{}{}); !had {
		if b.n.Add(1) > busyBacklog {
			b.busyAt.Store(now.UnixNano())
		}
	}
}

// done records that the status of the Sandbox key is written now, or that
// the Sandbox is gone.
func (b *statusBacklog) done(key types.NamespacedName) {
	if _, had := b.waiting.LoadAndDelete(key); had {
		b.n.Add(-1)
	}
}

// busy reports a burst at now: more than busyBacklog Sandboxes wait, or
// did within busyFactor windows of base.
func (b *statusBacklog) busy(base time.Duration, now time.Time) bool {
	if b.n.Load() > busyBacklog {
		b.busyAt.Store(now.UnixNano())
		return true
	}
	at := b.busyAt.Load()
	return at != 0 && now.Sub(time.Unix(0, at)) < busyFactor*base
}

// hold says how long after now a transitional status whose Sandbox we last
// wrote for at last waits before it is looked at again, and zero when it is
// to be written now: base after last, or, in a burst, until the burst is
// over (looked at again every busyFactor windows), but not past busyHold
// windows after last.
func (b *statusBacklog) hold(base time.Duration, last, now time.Time) time.Duration {
	if !b.busy(base, now) {
		return max(last.Add(base).Sub(now), 0)
	}
	wait := last.Add(busyHold * base).Sub(now)
	if wait <= 0 {
		return 0
	}
	return min(wait, busyFactor*base)
}
