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
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// maxCommits bounds the times one reconcile makes a binding's commit again
// after it conflicted.
const maxCommits = 3

// serve runs the claim's plans until one ends the reconcile. It plans
// (render.PlanClaim), has the policies judge the plan, and runs it on the
// executor (claimRun). An expired claim's plan and a bound claim's end it.
// An unbound claim's plan adopts or creates its Sandbox and commits the
// binding, or reports why it cannot; what its run returns is the next
// plan's input: a member gone or taken is replaced by the next one the
// queue offers, a member changed since it was judged is planned again as
// read now (once), an adoption the API server refuses makes the claim
// cold-start, a create that finds the claim's own Sandbox commits that
// one, an answer that refuses the claim is reported, and a commit that
// conflicted is made again from the claim read again (which, when another
// controller bound the claim first, deletes the Sandbox bound here).
func (r *ClaimReconciler) serve(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs, offers *offers) (reconcile.Result, error) {
	expired, _ := render.ClaimExpired(in)
	bound := !expired && in.SandboxName != ""
	m, err := offers.next(ctx)
	if err != nil {
		return r.failed(ctx, claim, b, in, err)
	}
	retried, commits := false, 0
	var upgraded types.UID
	for {
		in.Candidates = nil
		if m != nil {
			in.Candidates = []*sandboxv1beta1.Sandbox{m}
		}
		plan, rej, err := r.plan(ctx, in)
		if err != nil || rej != nil {
			offers.giveBack(m)
		}
		switch {
		case err != nil && (expired || bound):
			return reconcile.Result{}, err
		case err != nil:
			return r.failed(ctx, claim, b, in, err)
		}
		last := len(plan.Steps) - 1
		run := &claimRun{r: r, claim: claim, b: b, in: in, bound: bound, upgraded: upgraded,
			forget: expired && in.Sandbox != nil && extv1beta1.IsClaimedBy(in.Sandbox, claim) &&
				last >= 0 && plan.Steps[last].Action == render.ActionStatus}
		result := after(plan, bound && in.Pending, ssa.CreateExpectation, in.Now)
		done, err := run.run(ctx, plan)
		switch {
		case expired:
			return reconcile.Result{}, err
		case bound && err != nil && done.failed.Action == render.ActionDelete:
			return reconcile.Result{}, err
		case bound:
			return result, err
		case rej != nil:
			// Terminal until the claim, its pool or its template changes
			// (all watched): report, do not retry.
			return result, terminal(rej, err)
		case err == nil:
			return result, nil
		}
		var again *adoptAgain
		var exists *boundAlready
		var refused *refusal
		switch step := done.failed; {
		case errors.As(err, &again):
			m, upgraded = again.member, again.member.UID
		case errors.As(err, &exists):
			bindTo(b, exists.sb, sandboxv1beta1.LaunchTypeCold, in.Now)
			in.SandboxName, in.Sandbox, in.Pending, in.ReadyAt, in.Committing = exists.sb.Name, exists.sb, false, b.readyAt, true
		case errors.As(err, &refused):
			in.Rejected = refused.rej
		case step.Action == render.ActionAdopt && outcomeUnknown(err):
			// The take went out and its answer did not come back: it may
			// have been made. The member is read to know; taking another
			// meanwhile could give the claim two. Until it is known, the
			// member stays out of the queue (its hold as taken).
			live, _, rerr := r.readTaken(ctx, claim, m)
			switch {
			case rerr != nil:
				b.uncertain = m
				return r.failed(ctx, claim, b, in, fmt.Errorf("adopting Sandbox %s: %w (and reading it again: %w)", m.Name, err, rerr))
			case live != nil:
				bindTo(b, live, sandboxv1beta1.LaunchTypeWarm, in.Now)
				metrics.ObserveClaimCreation(sandboxv1beta1.LaunchTypeWarm, in.Pool.Spec.TemplateRef.Name)
				in.SandboxName, in.Sandbox, in.Pending, in.ReadyAt, in.Committing = live.Name, live, false, b.readyAt, true
				m = nil
			default:
				next, err := offers.next(ctx)
				if err != nil {
					return r.failed(ctx, claim, b, in, err)
				}
				m, retried = next, false
			}
		case step.Action == render.ActionAdopt:
			next, again, reason, err := offers.failed(ctx, m, retried, err)
			if err != nil {
				return r.failed(ctx, claim, b, in, err)
			}
			if reason != "" {
				// The claim gets a Sandbox of its own.
				in.Refused, in.RefusedReason = m, reason
			}
			m, retried = next, again
		case step.Action == render.ActionCreate:
			if outcomeUnknown(err) {
				// The create may have been made: the claim takes no
				// warm member before it knows (resolveUncertain).
				b.uncertain = &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: step.Namespace, Name: step.Name}}
			}
			return r.failed(ctx, claim, b, in, err)
		case step.Action == render.ActionStatus && apierrors.IsConflict(err):
			live := &extv1beta1.SandboxClaim{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), live); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if commits++; commits >= maxCommits {
				return reconcile.Result{}, fmt.Errorf("binding status of claim %s kept conflicting", claim.Name)
			}
			in.Claim, in.Version, in.Committing = live, "", true
			in.SandboxName, in.Sandbox, in.Pending, in.ReadyAt = b.name, b.sandbox, b.sandbox == nil, b.readyAt
			if boundTo := render.ClaimBoundTo(in); boundTo != in.SandboxName {
				return r.release(ctx, claim, b, in, boundTo)
			}
		default:
			// The Sandbox is bound (it names the claim as controller); the
			// next pass finds it and writes the status.
			return reconcile.Result{}, err
		}
	}
}

// release carries out the plan of a binding another controller made first:
// the Sandbox bound here goes, and the claim is looked at again at once.
func (r *ClaimReconciler) release(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs, boundTo string) (reconcile.Result, error) {
	log.FromContext(ctx).Info("another controller bound the claim first; releasing ours", "sandbox", in.SandboxName, "kept", boundTo)
	plan, _, err := render.PlanClaim(in)
	if err == nil {
		_, err = (&claimRun{r: r, claim: claim, b: b, in: in}).run(ctx, plan)
	}
	if err == nil {
		b.name, b.sandbox, b.at = boundTo, nil, r.Clock.Now()
	}
	return reconcile.Result{RequeueAfter: time.Millisecond}, err
}

// failed reports an API error met while binding (a ReconcilerError, by the
// plan made with it as the claim's rejection) and returns it to be retried.
func (r *ClaimReconciler) failed(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs, err error) (reconcile.Result, error) {
	in.Rejected = &render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: err.Error()}
	in.Candidates, in.Committing = nil, false
	plan, _, perr := render.PlanClaim(in)
	if perr == nil {
		_, perr = (&claimRun{r: r, claim: claim, b: b, in: in}).run(ctx, plan)
	}
	if perr != nil {
		log.FromContext(ctx).V(1).Info("status not updated", "error", perr)
	}
	return reconcile.Result{}, err
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

// observeUnbound reads what an unbound claim is planned from: its pool and
// the pool's template and, when the claim can take a warm member and the
// pool's queue offers one, the members the pool is about to delete. It
// returns the pool's offers, empty when there are none to take.
func (r *ClaimReconciler) observeUnbound(ctx context.Context, claim *extv1beta1.SandboxClaim, in *render.ClaimPlanInputs) (*offers, error) {
	none := &offers{r: r, claim: claim}
	pool := &extv1beta1.SandboxWarmPool{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, pool); {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, fmt.Errorf("failed to get sandbox warm pool %q: %w", claim.Spec.WarmPoolRef.Name, err)
	}
	in.Pool = pool
	tmpl := &extv1beta1.SandboxTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl); {
	case apierrors.IsNotFound(err):
		tmpl = nil
	case err != nil:
		return none, fmt.Errorf("reading template: %w", err)
	}
	in.Template = tmpl
	in.Policies, in.Defaults = r.Policy.Get() != nil, render.CurrentDefaults(r.Defaults)
	if render.ValidateClaimMetadata(claim) != nil || render.NeedsColdStart(claim) {
		return none, nil
	}
	key := client.ObjectKeyFromObject(pool)
	if r.Queue.Len(key) == 0 {
		return none, nil
	}
	// The members are only read (and dropped with the plan): the cache's
	// own objects, not copies of every member for every claim.
	members, err := controlledSandboxes(ctx, r.Client, r.SandboxIndexer, pool, extv1beta1.WarmPoolKind)
	if err != nil {
		return none, fmt.Errorf("listing members: %w", err)
	}
	// The members the pool is about to delete, by the same decision the
	// pool makes, are never taken.
	in.Removals = render.WarmPoolRemovals(render.WarmPoolPlanInputs{
		WarmPoolInputs: render.WarmPoolInputs{Pool: pool, Template: tmpl},
		Members:        members,
	})
	return &offers{r: r, claim: claim, pool: key, accept: render.ClaimMayTake(pool, in.Removals)}, nil
}
