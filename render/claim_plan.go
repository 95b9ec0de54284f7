package render

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// ClaimPlanInputs are what one reconcile of a claim is decided from.
type ClaimPlanInputs struct {
	// Claim is the SandboxClaim, not being deleted.
	Claim *extv1beta1.SandboxClaim
	// SandboxName is the Sandbox bound to the claim, empty when none is;
	// Sandbox is it as observed (nil when not seen), and Pending says it
	// was created moments ago and is not observed yet.
	SandboxName string
	Sandbox     *sandboxv1beta1.Sandbox
	Pending     bool
	// ExpiredHere says this process expired the claim already: expiry is
	// final, even while the claim's status does not show it yet.
	ExpiredHere bool
	// NotOwned is, for an expired claim whose Sandbox is not seen as its
	// own, the message saying that a Sandbox of its name exists that it
	// does not control, whose deletion is skipped; empty otherwise.
	NotOwned string

	// Pool is the claim's warm pool, nil when it does not exist; Template
	// the pool's template, nil when it does not exist. Only an unbound
	// claim reads them.
	Pool     *extv1beta1.SandboxWarmPool
	Template *extv1beta1.SandboxTemplate
	// Candidates are the Ready members the pool's queue offers the claim,
	// in order; Removals the members the pool is about to delete
	// (WarmPoolRemovals), which a claim never takes.
	Candidates []*sandboxv1beta1.Sandbox
	Removals   []*sandboxv1beta1.Sandbox
	// FieldManager is the field manager an adoption applies as: what it
	// owns of the member is kept.
	FieldManager string
	// Refused is a member whose adoption the API server refused
	// (Forbidden or Invalid) for RefusedReason: the claim takes no
	// member, it cold-starts.
	Refused       *sandboxv1beta1.Sandbox
	RefusedReason string
	// Policies reports that policies are in force: the plan lists the
	// Sandbox the claim gets, and all it makes, as checks, rendered with
	// Defaults. PolicyDenied is the policies' denial of the checks of
	// this plan's first making: the claim is refused.
	Policies     bool
	Defaults     Defaults
	PolicyDenied string

	// Seen is when the controller first saw the claim, ReadyAt when it
	// first reported it Ready (zero: it has not): what the claim's
	// annotations record (ClaimAnnotations).
	Seen, ReadyAt time.Time

	// Others are the Sandboxes the claim controls besides the bound one,
	// as observed; Holding is one this process bound the claim to moments
	// ago (its commit may not show yet), never removed as a second.
	Others  []*sandboxv1beta1.Sandbox
	Holding string
	// Version is the claim's resourceVersion as our own last write left
	// it, newer than the observed claim's; empty: the claim's own. A new
	// binding's writes are guarded by it.
	Version string

	// Committing says that SandboxName (Sandbox, as its write returned
	// it) was bound to the unbound claim in this reconcile and the binding
	// is not committed yet: the plan is the commit alone, made again when
	// the commit conflicted, from the claim read again, or when the create
	// found the claim's Sandbox there already.
	Committing bool
	// Rejected is a rejection the API server's answer made while binding
	// (a create refused as invalid, a Sandbox of the claim's name that it
	// does not control, an API error): the plan reports it and does
	// nothing else.
	Rejected *ClaimRejection

	// Previous are the conditions last reported; nil: the claim's own.
	Previous []metav1.Condition
	// Now is the time of the reconcile; conditions are stamped with it,
	// truncated to the second.
	Now time.Time
	// TraceContext is the reconcile's trace-context annotation value, empty
	// with tracing off: a cold-started Sandbox carries it (ClaimInputs), and
	// so does a warm member from its adoption.
	TraceContext string
}

// ClaimExpired reports whether a claim is expired, and when it expires
// (zero when it does not): past the earlier of its shutdownTime and
// ttlSecondsAfterFinished after its Sandbox finished, expired by this
// process already, or reported expired before (kept by shutdownPolicy
// Retain: once its Sandbox is gone nothing may un-expire it, since the
// Finished time went with the Sandbox).
func ClaimExpired(in ClaimPlanInputs) (bool, time.Time) {
	conds := in.Claim.Status.Conditions
	if in.Sandbox != nil {
		conds = in.Sandbox.Status.Conditions
	}
	at := ClaimExpiry(in.Claim, FinishedAt(conds).Time)
	if (!at.IsZero() && !in.Now.Before(at)) || in.ExpiredHere || expiredBefore(in.Claim) {
		return true, at
	}
	return false, at
}

func expiredBefore(c *extv1beta1.SandboxClaim) bool {
	r := apimeta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady)
	return r != nil && r.Reason == extv1beta1.ReasonClaimExpired
}

// ClaimMayTake says which members of pool a claim may take: only members
// of this pool (not of an earlier pool of the same name), not being
// deleted, and none of removals, which the pool is about to delete (as
// stale under Recreate, or as excess over its replicas).
func ClaimMayTake(pool *extv1beta1.SandboxWarmPool, removals []*sandboxv1beta1.Sandbox) func(*sandboxv1beta1.Sandbox) bool {
	doomed := map[types.UID]bool{}
	for _, m := range removals {
		doomed[m.UID] = true
	}
	return func(sb *sandboxv1beta1.Sandbox) bool {
		return extv1beta1.IsPoolMember(sb, pool) && sb.DeletionTimestamp == nil && !doomed[sb.UID]
	}
}

// PlanClaim decides a claim's reconcile, whichever phase it is in, and is
// the only planner a claim's reconcile calls:
//   - an expired claim is expired as its shutdownPolicy says (claimExpiry);
//   - a rejection the API server's answer made is reported (Rejected,
//     claimRejection: the annotations, then the status);
//   - a binding made in this reconcile is committed (Committing,
//     claimCommit), or released when another controller bound the claim
//     first (ClaimBoundTo names the winner);
//   - a bound claim reports its Sandbox: the plan removes a second Sandbox
//     the claim controls once its status names the bound one
//     (secondSandboxDeletes), reports its Sandbox, then records the
//     annotations;
//   - an unbound claim gets one: a warm member, when the claim can take one
//     (it injects no variables and asks for no volumes) and the pool
//     offers one it may take (ClaimMayTake), adopted by an apply guarded by
//     the member's resourceVersion (AdoptionStep); else one of its own,
//     created cold from the template, named after the claim. What the
//     claim gets is judged by the policies first. The commit of the
//     binding follows in the same plan, made from the Sandbox as its write
//     leaves it: it runs only when that write succeeded (a plan's steps
//     stop at the first that fails). A claim that cannot be served comes
//     back as a rejection, with a plan that holds the events before it and
//     the steps reporting it; it is terminal until the claim, its pool or
//     its template changes.
func PlanClaim(in ClaimPlanInputs) (Plan, *ClaimRejection, error) {
	expired, at := ClaimExpired(in)
	if expired {
		return claimExpiry(in), nil, nil
	}
	var plan Plan
	if !at.IsZero() {
		plan.RecheckAt = &metav1.Time{Time: at}
	}
	switch {
	case in.Rejected != nil:
		plan.Problem = in.Rejected.Message
		plan.Steps = claimRejection(in, in.Rejected)
		return plan, in.Rejected, nil
	case in.Committing:
		plan.Steps = claimCommit(in)
		return plan, nil, nil
	case in.SandboxName != "":
		plan.Steps = append(plan.Steps, secondSandboxDeletes(in)...)
		st := ClaimStatus(in.statusInputs())
		plan.Steps = append(plan.Steps, claimStatusStep(in.Claim, st, false,
			"report the bound Sandbox (written only when it changed)"))
		// The annotations follow the status: it may report the claim
		// Ready for the first time, at Now.
		readyAt := in.ReadyAt
		if readyAt.IsZero() && reportsReady(st) && !isReady(in.Claim.Status.Conditions) {
			readyAt = in.Now
		}
		if a := ClaimAnnotations(in.Claim, in.SandboxName, in.seen(), readyAt); a != nil {
			plan.Steps = append(plan.Steps, *a)
		}
		return plan, nil, nil
	}
	steps, rej, err := planBinding(in, &plan)
	if err != nil {
		return plan, nil, err
	}
	plan.Steps = append(plan.Steps, steps...)
	if rej != nil {
		plan.Problem = rej.Message
		plan.Steps = append(plan.Steps, claimRejection(in, rej)...)
		return plan, rej, nil
	}
	commit, err := committed(in, steps)
	if err != nil {
		return plan, nil, err
	}
	plan.Steps = append(plan.Steps, claimCommit(commit)...)
	return plan, nil, nil
}

// committed are the inputs of the commit of the binding steps make: the
// Sandbox as the adopt or create step's write leaves it (a member as
// adopted, its status as observed: the adoption is guarded by the
// resourceVersion it was observed at; a new Sandbox as created).
func committed(in ClaimPlanInputs, steps []Step) (ClaimPlanInputs, error) {
	for _, s := range steps {
		if s.Action != ActionAdopt && s.Action != ActionCreate {
			continue
		}
		sb := &sandboxv1beta1.Sandbox{}
		if m, ok := s.Live.(*sandboxv1beta1.Sandbox); ok && s.Action == ActionAdopt {
			sb = Adopted(in.Claim, in.Template, m)
		} else if err := convert.JSON(s.Object, sb); err != nil {
			return in, fmt.Errorf("reading the Sandbox %s the claim is bound to: %w", s.Name, err)
		}
		in.SandboxName, in.Sandbox, in.Pending, in.Committing = sb.Name, sb, false, true
		in.Candidates, in.Refused = nil, nil
		return in, nil
	}
	return in, fmt.Errorf("claim %s: the plan binds no Sandbox", in.Claim.Name)
}

// planBinding plans how an unbound claim gets its Sandbox: its checks go
// into plan, its steps are returned.
func planBinding(in ClaimPlanInputs, plan *Plan) ([]Step, *ClaimRejection, error) {
	c := in.Claim
	if in.Pool == nil {
		return nil, poolNotFound(c), nil
	}
	if rej := ValidateClaimMetadata(c); rej != nil {
		return nil, rej, nil
	}
	var steps []Step
	if m := in.Refused; m != nil {
		steps = append(steps, claimEvent(c, corev1.EventTypeWarning, sandboxv1beta1.EventAdoptionRefused, "Adopt",
			fmt.Sprintf("taking warm Sandbox %s was refused (%s); creating a Sandbox for the claim instead", m.Name, in.RefusedReason),
			"the API server refused the adoption of a warm member: the member stays warm for others", m))
	} else if !NeedsColdStart(c) {
		// A warm member needs nothing from the template: it is taken
		// even while the template is missing.
		accept := ClaimMayTake(in.Pool, in.Removals)
		for _, m := range in.Candidates {
			if accept(m) {
				return planAdoption(in, m, plan)
			}
		}
	}
	t := in.Template
	if t == nil {
		return steps, &ClaimRejection{Reason: extv1beta1.ReasonTemplateNotFound,
			Message: fmt.Sprintf("SandboxTemplate %q not found", in.Pool.Spec.TemplateRef.Name)}, nil
	}
	if rej := ValidateClaim(c, t); rej != nil {
		return steps, rej, nil
	}
	desired, err := ClaimSandbox(ClaimInputs{Claim: c, Template: t, TraceContext: in.TraceContext})
	var rej *ClaimRejection
	if errors.As(err, &rej) {
		return steps, rej, nil
	} else if err != nil {
		return steps, &ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: err.Error()}, nil
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(desired, sb); err != nil {
		return steps, nil, err
	}
	if rej := in.judge(sb, "the claim's own Sandbox", plan); rej != nil {
		return steps, rej, nil
	}
	return append(steps,
		Step{Action: ActionCreate, Kind: "Sandbox", Namespace: c.Namespace, Name: sb.Name, Object: desired,
			Reason: "no warm member to take: the claim's own Sandbox from the template, named after the claim (a retry never makes a second)"},
		claimEvent(c, corev1.EventTypeNormal, sandboxv1beta1.EventSandboxProvisioned, "Provisioning",
			fmt.Sprintf("Created Sandbox %q", sb.Name), "recorded only when the create made the Sandbox", sb),
	), nil, nil
}

// planAdoption plans taking member m.
func planAdoption(in ClaimPlanInputs, m *sandboxv1beta1.Sandbox, plan *Plan) ([]Step, *ClaimRejection, error) {
	c := in.Claim
	if rej := MetadataConflict(m.Spec.PodTemplate.ObjectMeta, c.Spec.AdditionalPodMetadata); rej != nil {
		return nil, rej, nil
	}
	// A claim cannot get past a policy by taking a warm member instead of
	// creating one: the member is judged as the claim will have it.
	if rej := in.judge(Adopted(c, in.Template, m), "the warm member as the claim takes it", plan); rej != nil {
		return nil, rej, nil
	}
	adopt, err := AdoptionStep(c, in.Template, m, in.FieldManager)
	if err != nil {
		return nil, nil, fmt.Errorf("adopting Sandbox %s: %w", m.Name, err)
	}
	if ac, ok := adopt.Object.(*sandboxac.SandboxApplyConfiguration); ok && in.TraceContext != "" {
		// The member carries the reconcile's trace context from its
		// adoption, as a cold-started Sandbox does from its create.
		ac.WithAnnotations(map[string]string{sandboxv1beta1.AnnotationTraceContext: in.TraceContext})
	}
	return []Step{
		adopt,
		claimEvent(c, corev1.EventTypeNormal, sandboxv1beta1.EventSandboxAdopted, "Adoption",
			fmt.Sprintf("Adopted warm pool Sandbox %q", m.Name), "the member is the claim's", m),
	}, nil, nil
}

// AdoptionStep is the step that hands member m to claim c (Adoption): an
// apply as manager, forced, guarded by the member's resourceVersion, with
// the resume annotations of template t (nil when it is gone). A member
// that changed since it was judged (its status moved on, or its ownership
// was upgraded) is taken by the step made again from it as read anew.
func AdoptionStep(c *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate, m *sandboxv1beta1.Sandbox, manager string) (Step, error) {
	ac, err := Adoption(c, t, m, manager)
	if err != nil {
		return Step{}, err
	}
	return Step{Action: ActionAdopt, Kind: "Sandbox", Namespace: m.Namespace, Name: m.Name, Object: ac, Live: m,
		Reason: "take a Ready warm member of the pool, guarded by its UID and resourceVersion"}, nil
}

// judge lists sb, and all it makes, as the plan's checks, when policies are
// in force; it returns the rejection of a Sandbox that cannot be rendered
// for them, or that they denied.
func (in ClaimPlanInputs) judge(sb *sandboxv1beta1.Sandbox, why string, plan *Plan) *ClaimRejection {
	if !in.Policies {
		return nil
	}
	checks, err := NewSandboxChecks(sb, in.Defaults)
	if err != nil {
		return &ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: err.Error()}
	}
	checks[0].Reason = why
	plan.Checks = append(plan.Checks, checks...)
	if in.PolicyDenied != "" {
		return &ClaimRejection{Reason: extv1beta1.ReasonPolicyDenied, Message: in.PolicyDenied}
	}
	return nil
}

func poolNotFound(c *extv1beta1.SandboxClaim) *ClaimRejection {
	msg := fmt.Sprintf("SandboxWarmPool %q not found", c.Spec.WarmPoolRef.Name)
	if w, fromAlpha := c.Annotations[extv1alpha1.AnnotationWarmPool]; fromAlpha {
		// Ours only: a claim converted from v1alpha1 names a shadow pool
		// upstream has no counterpart of; say which to create.
		template := c.Annotations[extv1alpha1.AnnotationTemplateRef]
		msg = fmt.Sprintf("this claim was written as v1alpha1 (sandboxTemplateRef %q, warmpool %q), which maps to SandboxWarmPool %s; it does not exist: create it with spec.sandboxTemplateRef.name %q (replicas: 0 if you want no warm Sandboxes)",
			template, w, c.Spec.WarmPoolRef.Name, template)
	}
	return &ClaimRejection{Reason: extv1beta1.ReasonWarmPoolNotFound, Message: msg}
}
