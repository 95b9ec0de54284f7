package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// EventAdoptionRefused is the Warning event on a claim whose warm adoption
// the API server refused (Forbidden or Invalid); the claim cold-starts.
const EventAdoptionRefused = sandboxv1beta1.EventAdoptionRefused

// maxAdoptionAttempts bounds the members one claim tries before it
// cold-starts instead.
const maxAdoptionAttempts = 8

// warm is what adoptWarm did: the member taken and the plan that took it;
// a rejection and the plan that made it; or nothing, and a member whose
// adoption the API server refused.
type warm struct {
	sb            *sandboxv1beta1.Sandbox
	plan          render.Plan
	rej           *render.ClaimRejection
	refused       *sandboxv1beta1.Sandbox
	refusedReason string
	// uncertain is a member whose take may have been made: its answer
	// was lost, and reading it again failed too (binding.uncertain).
	uncertain *sandboxv1beta1.Sandbox
}

// adoptWarm takes a Ready member of the pool for the claim: it takes the
// next member the queue offers the claim (render.ClaimMayTake), has the
// claim's plan made with it as the candidate, and carries out its adopt
// step. It takes none when the pool has none to give, or none this claim
// may have (a refused adoption falls back to a cold start rather than
// retrying forever).
func (r *ClaimReconciler) adoptWarm(ctx context.Context, claim *extv1beta1.SandboxClaim, in render.ClaimPlanInputs) (warm, error) {
	key := client.ObjectKeyFromObject(in.Pool)
	if r.Queue.Len(key) == 0 {
		return warm{}, nil
	}
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(in.Pool.Namespace), controlledBy(in.Pool, extv1beta1.WarmPoolKind)); err != nil {
		return warm{}, fmt.Errorf("listing members: %w", err)
	}
	members := make([]*sandboxv1beta1.Sandbox, len(list.Items))
	for i := range list.Items {
		members[i] = &list.Items[i]
	}
	// The members the pool is about to delete, by the same decision the
	// pool makes, are never taken.
	in.Removals = render.WarmPoolRemovals(render.WarmPoolPlanInputs{
		WarmPoolInputs: render.WarmPoolInputs{Pool: in.Pool, Template: in.Template},
		Members:        members,
	})
	accept := render.ClaimMayTake(in.Pool, in.Removals)
	for range maxAdoptionAttempts {
		m := r.Queue.Take(key, accept)
		if m == nil {
			return warm{}, nil
		}
		// What runs is judged too: a member whose Pod the policies deny
		// is not handed out, and its pool replaces it.
		switch denial, err := r.memberPodDenied(ctx, claim, m); {
		case err != nil:
			r.Queue.Return(m)
			return warm{}, err
		case denial != "":
			r.passOver(ctx, claim, m, denial)
			continue
		}
		in.Candidates = []*sandboxv1beta1.Sandbox{m}
		plan, rej, err := r.plan(ctx, in)
		if err != nil || rej != nil {
			r.Queue.Return(m)
			return warm{plan: plan, rej: rej}, err
		}
		step, ok := adoptStep(plan)
		if !ok {
			r.Queue.Return(m)
			return warm{}, fmt.Errorf("claim %s: the plan takes no warm member", claim.Name)
		}
		sb, err := r.take(ctx, claim, in.Template, m, step)
		switch {
		case err == nil:
			return warm{sb: sb, plan: plan}, nil
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// The member changed since the cache saw it: another claim
			// may have taken it, its pool may be deleting it, or only its
			// status moved on. Look again.
			live := &sandboxv1beta1.Sandbox{}
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); gerr != nil {
				if !apierrors.IsNotFound(gerr) {
					r.Queue.Return(m)
				}
				continue
			}
			if !claimable(live) || !accept(live) {
				r.Queue.Return(live)
				continue
			}
			// The same member, judged already: the step is made again
			// from it as read now, guarded by its new resourceVersion.
			if again, err := render.AdoptionStep(claim, in.Template, live, r.Engine.FieldManager()); err == nil {
				if sb, err := r.take(ctx, claim, in.Template, live, again); err == nil {
					return warm{sb: sb, plan: plan}, nil
				}
			}
			r.Queue.Return(live)
			continue
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// Refused by admission (a webhook or a ValidatingAdmission
			// Policy on Sandbox updates) or by validation: retrying the
			// same patch cannot succeed. The member stays warm for others
			// and the claim gets a Sandbox of its own.
			r.Queue.Return(m)
			log.FromContext(ctx).Info("adopting a warm Sandbox was refused; creating one instead", "sandbox", m.Name, "reason", apierrors.ReasonForError(err))
			return warm{refused: m, refusedReason: string(apierrors.ReasonForError(err))}, nil
		case outcomeUnknown(err):
			// The take went out and its answer did not come back: it may
			// have been made. Read the member to know; taking another
			// meanwhile could give the claim two. The member stays out of
			// the queue (the queue's hold for taken members) until known.
			live, known, rerr := r.readTaken(ctx, claim, m)
			switch {
			case rerr != nil:
				return warm{uncertain: m}, fmt.Errorf("adopting Sandbox %s: %w (and reading it again: %w)", m.Name, err, rerr)
			case live != nil:
				return warm{sb: live, plan: plan}, nil
			case known:
				continue
			}
		default:
			r.Queue.Return(m)
			return warm{}, fmt.Errorf("adopting Sandbox %s: %w", m.Name, err)
		}
	}
	return warm{}, nil
}

// take carries out the adopt step for member m. A member our field manager
// still owns through an Update entry (created by an older controller, or
// its upgrade after the create was lost) is upgraded first, guarded by its
// resourceVersion, and the step made again from it as upgraded: only then
// does the apply remove the pool's labels and reference.
func (r *ClaimReconciler) take(ctx context.Context, claim *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate,
	m *sandboxv1beta1.Sandbox, step render.Step) (*sandboxv1beta1.Sandbox, error) {
	if len(m.ManagedFields) == 0 {
		// What our field manager owns cannot be told: an apply built
		// without it could give up fields of the member.
		return nil, fmt.Errorf("adopting Sandbox %s: read without managedFields", m.Name)
	}
	if r.Engine.NeedsUpgrade(m) {
		// The upgrade rewrites the member's whole managedFields list, so
		// it is made from the member as the API server holds it: the
		// cache keeps only our managers' entries (CacheOptions).
		up := &sandboxv1beta1.Sandbox{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), up); err != nil {
			return nil, err
		}
		switch {
		case up.UID != m.UID:
			return nil, apierrors.NewNotFound(sandboxesResource, m.Name)
		case up.ResourceVersion != m.ResourceVersion:
			// Changed since it was judged: the caller looks again.
			return nil, apierrors.NewConflict(sandboxesResource, m.Name, fmt.Errorf("changed since it was judged"))
		}
		if _, err := r.Engine.UpgradeOwnership(ctx, "Sandbox", up); err != nil {
			return nil, err
		}
		again, err := render.AdoptionStep(claim, t, up, r.Engine.FieldManager())
		if err != nil {
			return nil, err
		}
		step = again
	}
	sb, _, err := adoptSandbox(ctx, r.Engine, step)
	return sb, err
}

var sandboxesResource = sandboxv1beta1.GroupVersion.WithResource("sandboxes").GroupResource()

// adoptStep is the adopt step of a plan.
func adoptStep(plan render.Plan) (render.Step, bool) {
	for _, s := range plan.Steps {
		if s.Action == render.ActionAdopt {
			return s, true
		}
	}
	return render.Step{}, false
}

// outcomeUnknown reports an error after which a write may or may not have
// been made: no answer from the API server (a connection lost, a timeout),
// or an answer that it failed while processing the request.
func outcomeUnknown(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// readTaken reads member m past the cache after a take whose outcome is
// unknown: the member as read when the claim took it (live), or, when it
// is known not taken (gone, another object, or not the claim's), nil and
// known; an error when it cannot be read.
func (r *ClaimReconciler) readTaken(ctx context.Context, claim *extv1beta1.SandboxClaim, m *sandboxv1beta1.Sandbox) (live *sandboxv1beta1.Sandbox, known bool, err error) {
	got := &sandboxv1beta1.Sandbox{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), got); {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	if got.UID == m.UID && extv1beta1.IsClaimedBy(got, claim) {
		return got, true, nil
	}
	return nil, true, nil
}

// resolveUncertain settles a take whose outcome this process does not know
// (binding.uncertain) before the claim binds anything: the member, if the
// claim took it, else nil; an error while it cannot be read.
func (r *ClaimReconciler) resolveUncertain(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, now time.Time) (*sandboxv1beta1.Sandbox, error) {
	m := b.uncertain
	live, _, err := r.readTaken(ctx, claim, m)
	if err != nil {
		return nil, fmt.Errorf("the take of warm Sandbox %s may have been made, and reading it failed: %w", m.Name, err)
	}
	b.uncertain = nil
	if live == nil {
		log.FromContext(ctx).Info("a warm Sandbox whose take was not answered was not taken", "sandbox", m.Name)
		return nil, nil
	}
	log.FromContext(ctx).Info("a warm Sandbox whose take was not answered was taken", "sandbox", m.Name)
	r.bindTo(b, live, sandboxv1beta1.LaunchTypeWarm, now)
	return live, nil
}
