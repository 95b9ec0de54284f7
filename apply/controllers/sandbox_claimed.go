package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimCommitWait bounds how long after a claim took a warm Sandbox the
// Sandbox's reconcile waits for the claims being served (as long as a
// pool's refill may wait for them, WarmPoolReconciler.RefillMaxDelay), and
// claimCommitPoll is how often it looks meanwhile.
const (
	claimCommitWait = 5 * time.Second
	claimCommitPoll = 50 * time.Millisecond
)

// awaitClaimCommit says how long to put off reconciling sb: a warm Sandbox
// a claim took from its pool moments ago, while its claim is still waiting
// (its commit, the annotations and the status reporting it Ready, is being
// written; waitsForMember) or, when Claims is set, while other claims wait
// for members the pool still has (a burst is being served). What the
// Sandbox's reconcile writes then (its Pod's labels, leaving the pool; its
// status) is needed by no one before the claim is Ready, and would compete
// with the claims' own writes for the API server; it follows them, or
// claimCommitWait after the take at the latest. Zero: go ahead (no claim, a
// cold start, a claim that is gone, or bound already and no burst).
func (r *SandboxReconciler) awaitClaimCommit(ctx context.Context, sb *sandboxv1beta1.Sandbox, now time.Time) time.Duration {
	ref := extv1beta1.ClaimOf(sb)
	if !r.Templates || ref == nil || sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeWarm {
		return 0
	}
	at, ok := sandboxv1beta1.AppliedAt(sb, r.Engine.FieldManager())
	if !ok || now.Sub(at) >= claimCommitWait {
		return 0
	}
	claim := &extv1beta1.SandboxClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: ref.Name}, claim); err != nil || claim.UID != ref.UID {
		return 0
	}
	if waitsForMember(claim) {
		return claimCommitPoll
	}
	if r.Claims != nil {
		pool := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}
		if r.Claims.Serving(pool) {
			return claimCommitPoll
		}
	}
	return 0
}
