package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/render"
)

// bindClaim gives an unbound claim its Sandbox and commits the binding, or
// reports why it cannot (render.ClaimRejectionSteps).
func (r *ClaimReconciler) bindClaim(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs) (reconcile.Result, error) {
	now := in.Now
	result := recheck(render.Plan{RecheckAt: expiryAt(in)}, now)
	sb, rej, err := r.bind(ctx, claim, b, in)
	if err != nil {
		failed := &render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: err.Error()}
		if serr := r.report(ctx, claim, b, render.ClaimRejectionSteps(in, failed)); serr != nil {
			log.FromContext(ctx).V(1).Info("status not updated", "error", serr)
		}
		return reconcile.Result{}, err
	}
	if rej != nil {
		// Terminal until the claim, its pool or its template changes
		// (all watched): report, do not retry.
		return result, terminal(rej, r.report(ctx, claim, b, render.ClaimRejectionSteps(in, rej)))
	}
	if sb != nil && render.IsSandboxReady(sb) && b.readyAt.IsZero() {
		// The commit reports the claim Ready (a Ready warm member); its
		// plan records it first Ready now.
		b.readyAt = now
	}
	in.SandboxName, in.Sandbox, in.Pending, in.ReadyAt = b.name, sb, sb == nil, b.readyAt
	won, err := r.commit(ctx, claim, b, in)
	if err != nil || !won {
		if !won {
			// Another controller bound the claim: look again at once.
			return reconcile.Result{RequeueAfter: time.Millisecond}, err
		}
		return reconcile.Result{}, err
	}
	return result, nil
}

// report carries out the steps that report a claim's rejection: its
// annotations (a failure is only logged), then its status.
func (r *ClaimReconciler) report(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, steps []render.Step) error {
	for _, s := range steps {
		switch s.Action {
		case render.ActionAnnotate:
			if _, err := r.writeAnnotations(ctx, s); err != nil {
				log.FromContext(ctx).V(1).Info("annotations not updated", "error", err)
			}
		case render.ActionStatus:
			return r.writeStatus(ctx, claim, b, s.Object.(*extac.SandboxClaimApplyConfiguration))
		}
	}
	return nil
}

// expiryAt is when the claim expires, nil when it does not.
func expiryAt(in render.ClaimPlanInputs) *metav1.Time {
	if _, at := render.ClaimExpired(in); !at.IsZero() {
		return &metav1.Time{Time: at}
	}
	return nil
}

// bind gives an unbound claim a Sandbox, as render.PlanClaim decides: a
// warm member when the claim can take one and the pool's queue offers one
// (adoptWarm), else a new one from the template.
func (r *ClaimReconciler) bind(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs) (*sandboxv1beta1.Sandbox, *render.ClaimRejection, error) {
	pool := &extv1beta1.SandboxWarmPool{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, pool); {
	case apierrors.IsNotFound(err):
		pool = nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to get sandbox warm pool %q: %w", claim.Spec.WarmPoolRef.Name, err)
	}
	in.Pool = pool
	if pool != nil {
		tmpl := &extv1beta1.SandboxTemplate{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl); {
		case apierrors.IsNotFound(err):
			tmpl = nil
		case err != nil:
			return nil, nil, fmt.Errorf("reading template: %w", err)
		}
		in.Template = tmpl
		in.Policies, in.Defaults = r.Policy.Get() != nil, render.CurrentDefaults(r.Defaults)
	}
	if pool != nil && render.ValidateClaimMetadata(claim) == nil && !render.NeedsColdStart(claim) {
		w, err := r.adoptWarm(ctx, claim, in)
		if w.uncertain != nil {
			b.uncertain = w.uncertain
		}
		if err != nil || w.rej != nil {
			return nil, w.rej, err
		}
		if w.sb != nil {
			r.bindTo(b, w.sb, sandboxv1beta1.LaunchTypeWarm, in.Now)
			metrics.ObserveClaimCreation(sandboxv1beta1.LaunchTypeWarm, pool.Spec.TemplateRef.Name)
			r.events(claim, w.plan, w.sb)
			return w.sb, nil, nil
		}
		// Cold: no member to take, or the API server refused one.
		in.Refused, in.RefusedReason = w.refused, w.refusedReason
	}
	in.Candidates = nil
	plan, rej, err := r.plan(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	r.events(claim, plan, nil)
	if rej != nil {
		return nil, rej, nil
	}
	sb, rej, err := r.coldStart(ctx, claim, in.Template.Name, plan)
	if err != nil || rej != nil {
		return nil, rej, err
	}
	r.bindTo(b, sb, sandboxv1beta1.LaunchTypeCold, in.Now)
	return sb, nil, nil
}

// plan makes the claim's plan and has the policies judge its checks; a
// denial goes back into it, and it is made again.
func (r *ClaimReconciler) plan(ctx context.Context, in render.ClaimPlanInputs) (render.Plan, *render.ClaimRejection, error) {
	plan, rej, err := render.PlanClaim(in)
	set := r.Policy.Get()
	if err != nil || rej != nil || len(plan.Checks) == 0 || set == nil {
		return plan, rej, err
	}
	inNS, _ := r.Policy.In(ctx, in.Claim.Namespace)
	var denied *policyError
	switch _, err := checkPlanned(inNS, set, plan.Checks); {
	case errors.As(err, &denied):
		in.PolicyDenied = denied.Error()
		return render.PlanClaim(in)
	case err != nil:
		return plan, nil, err
	}
	return plan, nil, nil
}

// events records the event steps of a claim's plan up to its first
// object step (those before a rejection, a refused adoption's), or, with
// done, those after it: the object the step wrote is their related
// object.
func (r *ClaimReconciler) events(claim *extv1beta1.SandboxClaim, plan render.Plan, done *sandboxv1beta1.Sandbox) {
	after := false
	for _, s := range plan.Steps {
		switch {
		case s.Action == render.ActionAdopt || s.Action == render.ActionCreate:
			after = true
		case s.Action == render.ActionEvent && after == (done != nil):
			related := s.Event.RelatedObject
			if done != nil {
				related = done
			}
			r.Recorder.Eventf(claim, related, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
		}
	}
}

func (r *ClaimReconciler) bindTo(b *binding, sb *sandboxv1beta1.Sandbox, launchType string, now time.Time) {
	b.name, b.sandbox, b.at, b.launchType = sb.Name, sb, now, launchType
}

// coldStart carries out the create step of the claim's plan: the claim's
// own Sandbox, named after the claim, so a retry can never make a second
// one. One of its name that the claim controls is the claim's.
func (r *ClaimReconciler) coldStart(ctx context.Context, claim *extv1beta1.SandboxClaim, template string, plan render.Plan) (*sandboxv1beta1.Sandbox, *render.ClaimRejection, error) {
	var step *render.Step
	for i := range plan.Steps {
		if plan.Steps[i].Action == render.ActionCreate {
			step = &plan.Steps[i]
		}
	}
	if step == nil {
		return nil, nil, fmt.Errorf("claim %s: the plan creates no Sandbox", claim.Name)
	}
	sb, _, exists, err := createSandbox(ctx, r.Engine, *step)
	switch {
	case apierrors.IsInvalid(err):
		return nil, &render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError,
			Message: fmt.Sprintf("sandbox create error: %v", err)}, nil
	case err != nil:
		return nil, nil, err
	case exists:
		live := &sandboxv1beta1.Sandbox{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sb), live); err != nil {
			return nil, nil, fmt.Errorf("reading Sandbox %s: %w", sb.Name, err)
		}
		if !extv1beta1.IsClaimedBy(live, claim) {
			return nil, &render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError,
				Message: fmt.Sprintf("sandbox %q is not controlled by claim %q. Please use a different claim name or delete the sandbox manually", sb.Name, claim.Name)}, nil
		}
		return live, nil, nil
	}
	metrics.ObserveClaimCreation(sandboxv1beta1.LaunchTypeCold, template)
	r.events(claim, plan, sb)
	return sb, nil, nil
}
