package controllers

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// busyBacklog is how many Sandboxes may wait for a deferred transitional
// status, or have had their children created or deleted by the controller
// within two windows, before the controller counts as busy (a burst of
// creates, suspends or resumes). The second measure catches a steady stream
// of starts that the first can miss: how many wait at a moment depends on
// how soon each is looked at again, and a Pod still starting one window
// after its creation costs a transitional write unless the controller is
// busy. In a burst the API server is the bottleneck: a transitional status
// (a Pod still starting or terminating) is a refresh that competes with the
// writes of the Sandboxes behind it, and it would be overwritten by the
// resting status moments later. So while busy, a transitional status is held
// for as long as the burst makes progress: within the last busyStall windows
// some Sandbox reached a resting status (Ready, suspended, failed), the
// controller created or deleted a child, or the Pod of a held Sandbox
// changed (scheduled, started, terminating) since it was held. A burst that
// stalls (no Pod gets anywhere, say a node is gone) is reported as a quiet
// controller would. A Sandbox whose Pod is only waiting its turn (the
// scheduler or the kubelet has not got to it yet, podWaitsItsTurn) is held
// for as long as the burst moves: in a cold create of 20,000 a Pod may wait
// an hour for the scheduler, far past any fixed bound, and each Sandbox
// written at such a bound is a write in the middle of the burst. One whose
// Pod shows trouble (unschedulable, a container backing off or restarting,
// terminating past its deadline) is held no longer than busyHold windows
// after our last write for it, so a Pod stuck in a burst that otherwise
// moves is still reported. A held Sandbox is looked at again every busyLook
// windows, or sooner when its Pod changes; with more held than busyLooks a
// second over that (6,000 at the default window), less often, so that
// looking at Sandboxes whose Pods have not moved stays at busyLooks
// reconciles a second (a cold create of 20,000 would otherwise be 330 a
// second for the hour it lasts). The burst counts as over
// busyFactor windows after the backlog fell to busyBacklog, so that its tail
// is not written either. Resting statuses are never deferred.
const (
	busyBacklog = 50
	busyFactor  = 3
	busyStall   = 12
	busyLook    = 12
	busyHold    = 120
	busyLooks   = 100
)

// statusBacklog counts the Sandboxes whose transitional status is deferred
// right now, remembers when there were many, and when a burst last made
// progress.
type statusBacklog struct {
	waiting sync.Map // types.NamespacedName -> string, its Pod's resourceVersion when held
	n       atomic.Int64
	// busyAt is when the backlog was last seen above busyBacklog (unix
	// nanoseconds), zero if never.
	busyAt atomic.Int64
	// movedAt is when a burst began or last made progress (unix
	// nanoseconds), zero if never.
	movedAt atomic.Int64

	mu sync.Mutex
	// Children changed in the window that began at windowAt, and in the
	// one before it.
	windowAt        time.Time
	changes, before int
}

// wait records that the status of the Sandbox key is deferred at now,
// with its Pod at resourceVersion pod ("" for none). A Sandbox held again
// whose Pod changed meanwhile is progress. The waiter that takes the
// backlog above busyBacklog after a burst is over begins a new one, and
// starts its progress clock.
func (b *statusBacklog) wait(key types.NamespacedName, pod string, base time.Duration, now time.Time) {
	if prev, had := b.waiting.Swap(key, pod); had {
		if prev != pod {
			b.progress(now)
		}
		return
	}
	if n := b.n.Add(1); n > busyBacklog {
		prev := b.busyAt.Swap(now.UnixNano())
		if n == busyBacklog+1 && (prev == 0 || now.Sub(time.Unix(0, prev)) >= busyFactor*base) {
			b.movedAt.Store(now.UnixNano())
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

// progress records that a Sandbox reached a resting status, or that its
// children or its Pod changed, at now: the burst, if any, is moving.
func (b *statusBacklog) progress(now time.Time) {
	b.movedAt.Store(now.UnixNano())
}

// changed records that the controller created or deleted a Sandbox's
// children at now: progress, and counted towards a burst.
func (b *statusBacklog) changed(base time.Duration, now time.Time) {
	b.progress(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(base, now)
	b.changes++
}

// roll moves the change counts' windows on to now. Called with mu held.
func (b *statusBacklog) roll(base time.Duration, now time.Time) {
	switch gone := now.Sub(b.windowAt); {
	case gone < base:
	case gone < 2*base:
		b.windowAt, b.before, b.changes = b.windowAt.Add(base), b.changes, 0
	default:
		b.windowAt, b.before, b.changes = now, 0, 0
	}
}

// streaming reports more than busyBacklog children changed within the
// current window and the one before.
func (b *statusBacklog) streaming(base time.Duration, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(base, now)
	return b.changes+b.before > busyBacklog
}

// busy reports a burst at now: more than busyBacklog Sandboxes wait or had
// their children changed lately (streaming), or did within busyFactor
// windows of base.
func (b *statusBacklog) busy(base time.Duration, now time.Time) bool {
	if b.n.Load() > busyBacklog || b.streaming(base, now) {
		b.busyAt.Store(now.UnixNano())
		return true
	}
	at := b.busyAt.Load()
	return at != 0 && now.Sub(time.Unix(0, at)) < busyFactor*base
}

// stalled reports a burst that made no progress for busyStall windows.
func (b *statusBacklog) stalled(base time.Duration, now time.Time) bool {
	return now.Sub(time.Unix(0, b.movedAt.Load())) >= busyStall*base
}

// hold says how long after now a transitional status whose Sandbox we last
// wrote for at last waits before it is looked at again, and zero when it is
// to be written now: base after last when quiet or stalled, or, in a burst
// that moves, until it is over (looked at again every look), and, unless
// its Pod is only waiting its turn (turn), not past busyHold windows after
// last.
func (b *statusBacklog) hold(base time.Duration, last, now time.Time, turn bool) time.Duration {
	if !b.busy(base, now) || b.stalled(base, now) {
		return max(last.Add(base).Sub(now), 0)
	}
	if turn {
		return b.look(base)
	}
	wait := last.Add(busyHold * base).Sub(now)
	if wait <= 0 {
		return 0
	}
	return min(wait, b.look(base))
}

// look is how long a held Sandbox waits before it is looked at again in a
// burst: busyLook windows, or as long as looking at every one held takes at
// busyLooks a second.
func (b *statusBacklog) look(base time.Duration) time.Duration {
	return max(busyLook*base, time.Duration(b.n.Load())*time.Second/busyLooks)
}
