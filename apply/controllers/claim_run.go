package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// claimRun is one run of a claim's plan on the executor: the claim's hooks
// (its memory of what it wrote, reported and bound) and what the run did.
// It decides nothing: what the API server answers goes back to the
// reconciler as an error, and becomes the next plan's input there.
type claimRun struct {
	r     *ClaimReconciler
	claim *extv1beta1.SandboxClaim
	b     *binding
	in    render.ClaimPlanInputs
	// bound: the plan is a bound claim's, whose annotations' failure is
	// returned (a binding's commit and a rejection's report only log it)
	// and whose deletes remove second Sandboxes.
	bound bool
	// forget: the plan's last step reports an expired claim whose Sandbox
	// is deleted: the Sandbox remembered from the binding is forgotten.
	forget bool
	// written is the Sandbox the plan's adopt or create step wrote, as its
	// write returned it.
	written *sandboxv1beta1.Sandbox
	// upgraded is the member whose ownership this reconcile upgraded
	// already: it is taken as it is.
	upgraded types.UID
	// guard is the resourceVersion the annotations were guarded by, next
	// the one their write left: the commit's status is guarded by it.
	guard, next string
}

// adoptAgain is what adopting a member returns when the member is to be
// planned again as read now: its ownership was upgraded.
type adoptAgain struct{ member *sandboxv1beta1.Sandbox }

func (e *adoptAgain) Error() string {
	return fmt.Sprintf("adopting Sandbox %s: its ownership was upgraded", e.member.Name)
}

// boundAlready is what a cold start returns when the claim's own Sandbox
// exists already (a retry after a lost answer): its binding is committed.
type boundAlready struct{ sb *sandboxv1beta1.Sandbox }

func (e *boundAlready) Error() string {
	return fmt.Sprintf("sandbox %s exists and is the claim's", e.sb.Name)
}

// refusal is an answer of the API server that refuses the claim: reported.
type refusal struct{ rej *render.ClaimRejection }

func (e *refusal) Error() string { return e.rej.Message }

// run carries out plan.
func (c *claimRun) run(ctx context.Context, plan render.Plan) (ran, error) {
	x := executor{engine: c.r.Engine, event: c.event, status: c.status, own: c.own}
	return x.run(ctx, plan)
}

// event records an event about the claim; one about the Sandbox the plan
// wrote is related to it as its write returned it.
func (c *claimRun) event(s render.Step) {
	related := s.Event.RelatedObject
	if c.written != nil && s.Event.Related == "Sandbox/"+c.written.Name {
		related = c.written
	}
	c.r.Recorder.Eventf(c.claim, related, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
}

// status writes the claim's status: a guarded one (a binding's commit)
// even when it is what we wrote last, by the resourceVersion our
// annotations' write left when it was guarded by the same.
func (c *claimRun) status(ctx context.Context, s render.Step, _ ssa.ChangeSet) (bool, error) {
	desired, ok := s.Object.(*extac.SandboxClaimApplyConfiguration)
	if !ok {
		return true, fmt.Errorf("plan status step holds %T", s.Object)
	}
	guarded := desired.ResourceVersion != nil
	if guarded && c.next != "" && deref(desired.ResourceVersion) == c.guard {
		// Our annotations' write moved the claim on: the status is
		// guarded by the version it left.
		desired.WithResourceVersion(c.next)
	}
	if c.forget {
		// From now on only the cache says whether the Sandbox still
		// exists: the object remembered from the binding must not stand in
		// for it once it is gone.
		c.b.sandbox, c.b.at = nil, time.Time{}
	}
	return false, c.r.applyStatus(ctx, c.claim, c.b, desired, guarded)
}

// own carries out the claim's object steps: taking a member, creating the
// claim's own Sandbox, its annotations, and deletes (logged).
func (c *claimRun) own(ctx context.Context, s render.Step) (*ssa.Change, bool, error) {
	switch s.Action {
	case render.ActionAdopt:
		m, _ := s.Live.(*sandboxv1beta1.Sandbox)
		if m == nil {
			return nil, true, fmt.Errorf("claim %s: adopt step without its member", c.claim.Name)
		}
		sb, err := c.r.take(ctx, m, s, m.UID == c.upgraded)
		if err != nil {
			return nil, true, err
		}
		c.bindTo(sb, sandboxv1beta1.LaunchTypeWarm)
		metrics.ObserveClaimCreation(sandboxv1beta1.LaunchTypeWarm, c.in.Pool.Spec.TemplateRef.Name)
		return nil, true, nil
	case render.ActionCreate:
		sb, err := c.r.coldStart(ctx, c.claim, s)
		if err != nil {
			return nil, true, err
		}
		c.bindTo(sb, sandboxv1beta1.LaunchTypeCold)
		metrics.ObserveClaimCreation(sandboxv1beta1.LaunchTypeCold, c.in.Template.Name)
		return nil, true, nil
	case render.ActionAnnotate:
		if desired, ok := s.Object.(*extac.SandboxClaimApplyConfiguration); ok && desired.ResourceVersion != nil {
			c.guard = *desired.ResourceVersion
		}
		rv, err := c.r.writeAnnotations(ctx, s)
		switch {
		case err != nil && !c.bound:
			log.FromContext(ctx).V(1).Info("annotations not updated", "error", err)
			return nil, true, nil
		case err != nil:
			return nil, true, err
		case rv != "":
			c.claim.ResourceVersion, c.next = rv, rv
			claimStatus.rememberVersion(&c.r.memory.status, c.claim, rv)
		}
		return nil, true, nil
	case render.ActionDelete:
		ch, err := execute(ctx, c.r.Engine, s)
		if err == nil && c.bound {
			log.FromContext(ctx).Info("removed a second Sandbox bound to the claim by a concurrent controller", "sandbox", s.Name, "kept", c.in.SandboxName)
		}
		return &ch, true, err
	}
	return nil, false, nil
}

// bindTo remembers the Sandbox the plan bound the claim to, and, when it
// is Ready (a Ready warm member), that the commit reports the claim Ready
// now.
func (c *claimRun) bindTo(sb *sandboxv1beta1.Sandbox, launchType string) {
	c.written = sb
	bindTo(c.b, sb, launchType, c.in.Now)
}

func bindTo(b *binding, sb *sandboxv1beta1.Sandbox, launchType string, now time.Time) {
	b.name, b.sandbox, b.at, b.launchType = sb.Name, sb, now, launchType
	if render.IsSandboxReady(sb) && b.readyAt.IsZero() {
		b.readyAt = now
	}
}

// take carries out the adopt step for member m. A member our field manager
// still owns through an Update entry (created by an older controller, or
// its upgrade after the create was lost) is upgraded first, guarded by its
// resourceVersion, and comes back (adoptAgain) to be planned again as
// upgraded: only then does the apply remove the pool's labels and
// reference (upgraded: it was, in this reconcile).
func (r *ClaimReconciler) take(ctx context.Context, m *sandboxv1beta1.Sandbox, step render.Step, upgraded bool) (*sandboxv1beta1.Sandbox, error) {
	if len(m.ManagedFields) == 0 {
		// What our field manager owns cannot be told: an apply built
		// without it could give up fields of the member.
		return nil, fmt.Errorf("adopting Sandbox %s: read without managedFields", m.Name)
	}
	if !upgraded && r.Engine.NeedsUpgrade(m) {
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
		return nil, &adoptAgain{member: up}
	}
	sb, _, err := adoptSandbox(ctx, r.Engine, step)
	return sb, err
}

var sandboxesResource = sandboxv1beta1.GroupVersion.WithResource("sandboxes").GroupResource()

// coldStart carries out the create step of the claim's plan: the claim's
// own Sandbox, named after the claim, so a retry can never make a second
// one. One of its name that the claim controls is the claim's
// (boundAlready); one it does not control, or a Sandbox the API server
// refuses as invalid, refuses the claim (refusal).
func (r *ClaimReconciler) coldStart(ctx context.Context, claim *extv1beta1.SandboxClaim, step render.Step) (*sandboxv1beta1.Sandbox, error) {
	sb, _, exists, err := createSandbox(ctx, r.Engine, step)
	switch {
	case apierrors.IsInvalid(err):
		return nil, &refusal{&render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError,
			Message: fmt.Sprintf("sandbox create error: %v", err)}}
	case err != nil:
		return nil, err
	case exists:
		live := &sandboxv1beta1.Sandbox{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sb), live); err != nil {
			return nil, fmt.Errorf("reading Sandbox %s: %w", sb.Name, err)
		}
		if !extv1beta1.IsClaimedBy(live, claim) {
			return nil, &refusal{&render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError,
				Message: fmt.Sprintf("sandbox %q is not controlled by claim %q. Please use a different claim name or delete the sandbox manually", sb.Name, claim.Name)}}
		}
		return nil, &boundAlready{sb: live}
	}
	return sb, nil
}
