package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimCommitWait bounds how long after a claim took a warm Sandbox the
// Sandbox's reconcile waits for its own claim's commit, and how long the
// claims of its pool may stand still before a burst of them no longer
// holds it back (as long as a pool's refill waits for them,
// WarmPoolReconciler.RefillMaxDelay); claimBurstWait bounds the wait
// for a burst (WarmPoolReconciler.RefillMaxHold), and claimCommitPoll is
// how often it looks meanwhile when no event would wake it.
const (
	claimCommitWait = 5 * time.Second
	claimBurstWait  = 30 * time.Second
	claimCommitPoll = 50 * time.Millisecond
)

// awaitClaimCommit says how long to put off reconciling sb: a warm Sandbox
// a claim took from its pool moments ago, while its claim is still waiting
// (its commit, the annotations and the status reporting it Ready, is being
// written; waitsForMember), for claimCommitWait after the take at most,
// or, when Claims is set, while a burst of claims is being served from the
// pool (WarmQueue.Serving), for claimBurstWait after the take at most.
// What the Sandbox's reconcile writes then (its Pod's labels, leaving the
// pool; its status) is needed by no one before the claim is Ready, and
// would compete with the claims' own writes for the API server. Zero: go
// ahead (no claim, a cold start, a claim that is gone, or bound already
// and no burst).
//
// With Claims set, the wait is parked in the queue (WarmQueue.ParkOnClaim,
// ParkWhileServing), which wakes sb when the claim's commit arrives or the
// burst ends; the duration returned is only the bound that time sets.
// Without it, the wait is looked at again every claimCommitPoll.
func (r *SandboxReconciler) awaitClaimCommit(ctx context.Context, sb *sandboxv1beta1.Sandbox, now time.Time) time.Duration {
	ref := extv1beta1.ClaimOf(sb)
	if !r.Templates || ref == nil || sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeWarm {
		return 0
	}
	at, ok := sandboxv1beta1.AppliedAt(sb, r.Engine.FieldManager())
	if !ok || now.Sub(at) >= claimBurstWait {
		return 0
	}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	claim := &extv1beta1.SandboxClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: ref.Name}, claim); err != nil || claim.UID != ref.UID {
		// A park on that claim ends with it (its stop wakes sb).
		return 0
	}
	if waitsForMember(claim) && now.Sub(at) < claimCommitWait {
		if r.Claims == nil {
			return claimCommitPoll
		}
		if r.Claims.ParkOnClaim(key, ref.UID) {
			return claimCommitWait - now.Sub(at)
		}
		// The queue has not seen the claim wait yet (its events lag the
		// cache we read): no event would wake sb, so look again soon.
		return claimCommitPoll
	}
	if r.Claims == nil {
		return 0
	}
	pool := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}
	if wait := r.Claims.ParkWhileServing(key, pool, now, claimCommitWait); wait > 0 {
		return min(wait, claimBurstWait-now.Sub(at))
	}
	return 0
}

// wakeSource is the Sandbox controller's source of the reconciles the warm
// queue wakes (WarmQueue.SetWake): it keeps the controller's queue, which
// wake adds to.
func (r *SandboxReconciler) wakeSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.woken.Store(&q)
		return nil
	})
}

// wake queues a reconcile of the Sandbox key, once the controller runs.
func (r *SandboxReconciler) wake(key types.NamespacedName) {
	if q := r.woken.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: key})
	}
}
