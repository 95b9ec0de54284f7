package controllers

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// expire carries out render.PlanClaimExpiry for a claim past its expiry:
// Delete and DeleteForeground delete the claim (and with it the Sandbox),
// Retain deletes the Sandbox and keeps the claim, reporting ClaimExpired.
// Expiry is final: this process remembers it, even while the cache does
// not show the expired status yet.
func (r *ClaimReconciler) expire(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs) (reconcile.Result, error) {
	b.expired = true
	retained := in.Sandbox != nil && extv1beta1.IsClaimedBy(in.Sandbox, claim)
	if !retained {
		msg, err := r.notOwned(ctx, claim, in.SandboxName)
		if err != nil {
			return reconcile.Result{}, err
		}
		in.NotOwned = msg
	}
	plan := render.PlanClaimExpiry(in)
	for i, s := range plan.Steps {
		switch s.Action {
		case render.ActionEvent:
			r.Recorder.Eventf(claim, s.Event.RelatedObject, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
		case render.ActionStatus:
			if retained && i == len(plan.Steps)-1 {
				// From now on only the cache says whether the Sandbox
				// still exists: the object remembered from the binding
				// must not stand in for it once it is gone.
				b.sandbox, b.at = nil, time.Time{}
			}
			if err := r.writeStatus(ctx, claim, b, s.Object.(*extac.SandboxClaimApplyConfiguration)); err != nil {
				return reconcile.Result{}, err
			}
		default:
			if _, err := execute(ctx, r.Engine, s); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	return reconcile.Result{}, nil
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
	if extv1beta1.IsClaimedBy(sb, claim) {
		return "", nil
	}
	return fmt.Sprintf("Claim expired. sandbox not owned by this claim: sandbox %q is not owned by claim %q; deletion skipped.", sb.Name, claim.Name), nil
}
