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

// SetWake sets what the queue calls with the name of a parked Sandbox, or
// a parked pool, when what it waits for may have ended (a waker's Wake:
// it queues a reconcile); nil wakes nothing. Both are called with the
// queue's lock held: they must not call the queue back.
func (q *WarmQueue) SetWake(sandbox, pool func(types.NamespacedName)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakeSandbox, q.wakePool = sandbox, pool
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
// pool (Serving), and returns how long until the burst ends by time alone
// (servingLeft). Sooner, the queue wakes sb when the pool's last waiting
// claim stops waiting or its last member leaves the queue. It returns
// zero, and unparks sb, when no burst is being served.
func (q *WarmQueue) ParkWhileServing(sb, pool types.NamespacedName, now time.Time, stall time.Duration) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	left := q.servingLeft(pool, now, stall)
	if left == 0 {
		delete(q.parked, sb)
		return 0
	}
	q.parked[sb] = parkSpot{pool: pool}
	return left
}

// ParkPoolWhileServing is ParkWhileServing for the pool itself: its refill
// waits parked while a burst of claims is served from it
// (WarmPoolReconciler.refillWait), and is woken as a Sandbox parked on it
// would be.
func (q *WarmQueue) ParkPoolWhileServing(pool types.NamespacedName, now time.Time, stall time.Duration) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	left := q.servingLeft(pool, now, stall)
	if left == 0 {
		delete(q.parkedPools, pool)
		return 0
	}
	q.parkedPools[pool] = struct{}{}
	return left
}

// servingLeft returns how long a burst of claims served from pool goes on
// by time alone (zero: none is served): until its claims have stood still
// for stall, or, with no members left to take, stall after the last take.
// Callers hold q.mu.
func (q *WarmQueue) servingLeft(pool types.NamespacedName, now time.Time, stall time.Duration) time.Duration {
	if !q.serving(pool, now, stall) {
		return 0
	}
	end := q.moved[pool].Add(stall)
	if mq := q.pools[pool]; mq == nil || len(mq.order) == 0 {
		if taken := q.lastTake[pool].Add(stall); taken.Before(end) {
			end = taken
		}
	}
	return end.Sub(now)
}

// Unpark forgets that sb waits.
func (q *WarmQueue) Unpark(sb types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.parked, sb)
}

// wakeParked wakes, and unparks, the Sandboxes parked on claim (when it is
// not empty), and the Sandboxes parked on pool and the pool itself (when
// it is not zero). Callers hold q.mu.
func (q *WarmQueue) wakeParked(claim types.UID, pool types.NamespacedName) {
	for sb, spot := range q.parked {
		if (claim != "" && spot.claim == claim) || (pool != (types.NamespacedName{}) && spot.pool == pool) {
			delete(q.parked, sb)
			if q.wakeSandbox != nil {
				q.wakeSandbox(sb)
			}
		}
	}
	if _, ok := q.parkedPools[pool]; ok {
		delete(q.parkedPools, pool)
		if q.wakePool != nil {
			q.wakePool(pool)
		}
	}
}
