package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// parkSpot is what a parked Sandbox waits for: the commit of the claim
// that took it (claim), or the end of a burst of claims served from its
// pool (pool).
type parkSpot struct {
	claim types.UID
	pool  types.NamespacedName
}

// SetWake sets what the queue calls with a parked Sandbox's name when what
// it waits for may have ended (SandboxReconciler.wake: it queues a
// reconcile). It is called with the queue's lock held: it must not call
// the queue back.
func (q *WarmQueue) SetWake(wake func(types.NamespacedName)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wake = wake
}

// ParkOnClaim parks sb (a member claim took) until claim stops waiting for
// its member, as the claim informer's events tell (its commit, the status
// reporting it Ready, arrived; or it went away), and reports true. It
// reports false, and parks nothing, when the queue does not see claim
// waiting: its events may not have arrived yet, or it stopped waiting.
func (q *WarmQueue) ParkOnClaim(sb types.NamespacedName, claim types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, waits := q.waitingIn[claim]; !waits {
		delete(q.parked, sb)
		return false
	}
	q.parked[sb] = parkSpot{claim: claim}
	return true
}

// ParkWhileServing parks sb while a burst of claims is being served from
// pool (Serving), and returns how long until the burst ends by time alone:
// its claims stand still for stall, or, with no members left to take, stall
// passes after the last take. Sooner, the queue wakes sb when the pool's
// last waiting claim stops waiting or its last member leaves the queue. It
// returns zero, and unparks sb, when no burst is being served.
func (q *WarmQueue) ParkWhileServing(sb, pool types.NamespacedName, now time.Time, stall time.Duration) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.serving(pool, now, stall) {
		delete(q.parked, sb)
		return 0
	}
	q.parked[sb] = parkSpot{pool: pool}
	end := q.moved[pool].Add(stall)
	if mq := q.pools[pool]; mq == nil || len(mq.order) == 0 {
		if taken := q.lastTake[pool].Add(stall); taken.Before(end) {
			end = taken
		}
	}
	return end.Sub(now)
}

// wakeParked wakes, and unparks, the Sandboxes parked on claim (when it is
// not empty) or on pool (when it is not zero). Callers hold q.mu.
func (q *WarmQueue) wakeParked(claim types.UID, pool types.NamespacedName) {
	for sb, spot := range q.parked {
		if (claim != "" && spot.claim == claim) || (pool != (types.NamespacedName{}) && spot.pool == pool) {
			delete(q.parked, sb)
			if q.wake != nil {
				q.wake(sb)
			}
		}
	}
}
