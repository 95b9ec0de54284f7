package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// expiredBefore reports a claim already reported expired (kept by
// shutdownPolicy Retain). Expiry is final: once its Sandbox is gone nothing
// may be computed to un-expire it (the Finished time went with the Sandbox),
// so a restarted controller never binds it a new one.
func expiredBefore(claim *extv1beta1.SandboxClaim) bool {
	c := findCondition(claim.Status.Conditions, extv1beta1.ConditionReady)
	return c != nil && c.Reason == extv1beta1.ReasonClaimExpired
}

// expire handles a claim past its expiry according to its shutdownPolicy:
// Delete and DeleteForeground delete the claim (and with it the Sandbox),
// Retain deletes the Sandbox and keeps the claim, reporting ClaimExpired.
func (r *ClaimReconciler) expire(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *sandboxv1beta1.Sandbox, name string, statusIn render.ClaimStatusInputs) (reconcile.Result, error) {
	if c := findCondition(claim.Status.Conditions, extv1beta1.ConditionReady); c == nil || c.Reason != extv1beta1.ReasonClaimExpired {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, sandboxv1beta1.EventClaimExpired, "Claim Expired", "Claim expired")
	}
	policy := extv1beta1.ShutdownPolicyRetain
	if claim.Spec.Lifecycle != nil && claim.Spec.Lifecycle.ShutdownPolicy != "" {
		policy = claim.Spec.Lifecycle.ShutdownPolicy
	}
	b := r.recall(claim)
	if b == nil {
		b = &binding{uid: claim.UID}
	}
	b.expired = true
	statusIn.Expired = true
	statusIn.SandboxName = name
	if sb != nil && controlledBy(sb, claim.UID) {
		// Reported (name, Pod IPs, Finished) until the Sandbox is gone.
		statusIn.Sandbox = sb
	} else if msg, err := r.notOwned(ctx, claim, name); err != nil {
		return reconcile.Result{}, err
	} else if msg != "" {
		statusIn.ExpiredMessage, statusIn.SandboxName = msg, ""
	}
	switch policy {
	case extv1beta1.ShutdownPolicyDelete, extv1beta1.ShutdownPolicyDeleteForeground:
		// As upstream: the expired status first, then the claim goes.
		if err := r.writeStatus(ctx, claim, b, statusIn); err != nil {
			return reconcile.Result{}, err
		}
		propagation := metav1.DeletePropagationBackground
		if policy == extv1beta1.ShutdownPolicyDeleteForeground {
			propagation = metav1.DeletePropagationForeground
		}
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, sandboxv1beta1.EventClaimExpired, "Deleting", "Deleting Claim (ShutdownPolicy=%s)", policy)
		_, err := r.Engine.Delete(ctx, "SandboxClaim", claim, client.PropagationPolicy(propagation))
		return reconcile.Result{}, err
	}
	if statusIn.Sandbox != nil && statusIn.Sandbox.DeletionTimestamp == nil {
		if _, err := r.Engine.DeleteIfUnchanged(ctx, "Sandbox", sb, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return reconcile.Result{}, err
		}
	}
	if statusIn.Sandbox != nil {
		// From now on only the cache says whether the Sandbox still
		// exists: the object remembered from the binding must not stand in
		// for it once it is gone.
		b.sandbox, b.at = nil, time.Time{}
	}
	return reconcile.Result{}, r.writeStatus(ctx, claim, b, statusIn)
}

// notOwned looks, as upstream does, for the Sandbox an expired claim would
// clean up (the one its status names, else the claim's own name) and, when
// one exists that the claim does not control, says that its deletion is
// skipped, in upstream's words.
func (r *ClaimReconciler) notOwned(ctx context.Context, claim *extv1beta1.SandboxClaim, name string) (string, error) {
	if name == "" {
		name = claim.Name
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: name}, sb); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if controlledBy(sb, claim.UID) {
		return "", nil
	}
	return fmt.Sprintf("Claim expired. sandbox not owned by this claim: sandbox %q is not owned by claim %q; deletion skipped.", sb.Name, claim.Name), nil
}
