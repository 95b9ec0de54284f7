package controllers

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// ClaimHandler returns the claim informer's event handler that keeps, per
// pool, the claims waiting for a member of it (Waiting): a claim naming the
// pool, not being deleted, bound to no Sandbox and not reported on yet (no
// Ready condition: a claim that was refused, or waits for a pool or a
// template, has one). A pool puts its refill off while claims wait
// (WarmPoolReconciler.refillWait), so they are served first.
func (q *WarmQueue) ClaimHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    q.observeClaim,
		UpdateFunc: func(_, obj any) { q.observeClaim(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if c, ok := obj.(*extv1beta1.SandboxClaim); ok {
				q.mu.Lock()
				defer q.mu.Unlock()
				q.stopWaiting(c.UID)
			}
		},
	}
}

// waitsForMember reports a claim that waits for a member of its pool.
func waitsForMember(c *extv1beta1.SandboxClaim) bool {
	return c.DeletionTimestamp == nil && c.Status.Sandbox.Name == "" &&
		apimeta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady) == nil
}

func (q *WarmQueue) observeClaim(obj any) {
	c, ok := obj.(*extv1beta1.SandboxClaim)
	if !ok {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	pool := types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.WarmPoolRef.Name}
	waits := waitsForMember(c)
	if in, ok := q.waitingIn[c.UID]; ok && waits && in == pool {
		return
	}
	q.stopWaiting(c.UID)
	if !waits {
		return
	}
	w := q.waiting[pool]
	if w == nil {
		w = map[types.UID]struct{}{}
		q.waiting[pool] = w
	}
	w[c.UID] = struct{}{}
	q.waitingIn[c.UID] = pool
	q.moved[pool] = q.now()
}

// stopWaiting forgets a claim's wait, a move of its pool's claims. Callers
// hold q.mu.
func (q *WarmQueue) stopWaiting(uid types.UID) {
	pool, ok := q.waitingIn[uid]
	if !ok {
		return
	}
	delete(q.waitingIn, uid)
	delete(q.waiting[pool], uid)
	q.moved[pool] = q.now()
	q.wakeParked(uid, types.NamespacedName{})
	if len(q.waiting[pool]) == 0 {
		delete(q.waiting, pool)
		delete(q.moved, pool)
		q.wakeParked("", pool)
	}
}

// Serves reports that claims of some pool are being served: they wait
// for a member, or the commit of the one they took, and moved less than
// claimCommitWait ago (claims that stood still longer are stuck, not
// served). The controller's Events wait meanwhile (eventgate.Gate's
// HoldWhile): a claim is served before anything is written for it, and
// an Event sent then would compete with its first write.
func (q *WarmQueue) Serves() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for _, moved := range q.moved {
		if now.Sub(moved) < claimCommitWait {
			return true
		}
	}
	return false
}

// Waiting returns the number of claims waiting for a member of a pool.
func (q *WarmQueue) Waiting(pool types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting[pool])
}

// Serving reports that a burst of claims is being served from a pool:
// claims wait for a member of it (one to take, or the commit of the one
// they took), they moved (one began to wait, took a member or stopped
// waiting) less than stall ago, and the pool still has members to take or
// one was taken less than stall ago. A refill, or a taken member's own
// writes, would then compete with the claims for the API server. Claims
// that did not move for stall are stuck, not served, and claims left with
// nothing to take (they start Sandboxes of their own) are better served by
// the refill: neither holds anything back.
func (q *WarmQueue) Serving(pool types.NamespacedName, now time.Time, stall time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.serving(pool, now, stall)
}

// serving is Serving; callers hold q.mu.
func (q *WarmQueue) serving(pool types.NamespacedName, now time.Time, stall time.Duration) bool {
	if len(q.waiting[pool]) == 0 || now.Sub(q.moved[pool]) >= stall {
		return false
	}
	q.release()
	mq := q.pools[pool]
	return (mq != nil && len(mq.order) > 0) || now.Sub(q.lastTake[pool]) < stall
}
