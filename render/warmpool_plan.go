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
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

var (
	errNoPool   = errors.New("render: warm pool needs a name, namespace and uid")
	errNoSuffix = errors.New("render: warm pool plan creates members but has no suffix source")
)

// WarmPoolPlanInputs is everything a pool's reconcile is planned from: the
// pool and its template, its members as observed, and what its status and
// progress events derive from. The reconciler keeps track of what it
// created and deleted moments ago (Pending, and the members it passes as
// being deleted) and of which names are in use; every decision is
// PlanWarmPool's.
type WarmPoolPlanInputs struct {
	WarmPoolInputs
	// Members are the Sandboxes the pool controls, as observed (including
	// ones being deleted). A Sandbox another controller took over (a claim
	// adopted it) is no longer the pool's: never counted, never deleted.
	Members []*sandboxv1beta1.Sandbox
	// Pending are names of members created moments ago that the observation
	// does not show yet. They count as members and are never picked for
	// deletion.
	Pending []string
	// Taken reports whether a Sandbox name is in use in the namespace (by
	// any Sandbox, claimed members included, or by a Pod): a new member
	// never gets one.
	Taken func(name string) bool
	// Suffix gives the random suffix of the i-th new member name a plan
	// tries (i counts from 0; see MemberName): the same i gives the same
	// suffix, so a plan made again from the same inputs is the same plan.
	// The controller's draws them at random, a test's fixes them
	// (SeededSuffixes). A plan that would create members needs one.
	Suffix func(i int) string
	// MaxBatch caps the members created in one step; zero means no cap.
	MaxBatch int
	// Policies reports that policies are in force: the plan lists a new
	// member, with the Pod, Service and PVCs it makes (rendered with
	// Defaults), for them to judge before any member is created, and
	// members that cannot be rendered so are not created (the plan's
	// Problem).
	Policies bool
	Defaults Defaults
	// PolicyDenied is the policies' denial of the checks of this
	// reconcile's first plan: the plan then creates nothing, says so in
	// status and, unless the last status said so already, in a
	// PolicyDenied event.
	PolicyDenied string
	// Held are the members the plan would delete that a claim holds at
	// this moment (the warm queue refused to give them up: the claim's
	// adoption is in flight). They are not deleted, the report counts them
	// as left, and the plan looks again within HeldRecheck: the claim
	// either adopts the member (it leaves the pool) or hands it back,
	// which brings no event the pool would see.
	Held map[types.UID]bool
	// Previous are the conditions last reported; nil means the pool's own.
	Previous []metav1.Condition
	// NotProgressingReported reports that the pool was last reported not
	// progressing (a WarmPoolNotProgressing event, no WarmPoolProgressing
	// since).
	NotProgressingReported bool
	// Grace is how long a member may take to become Ready.
	Grace time.Duration
	// Now is the time; status conditions are stamped with it to the second.
	Now time.Time
}

// members are the Sandboxes the pool still controls.
func (in WarmPoolPlanInputs) members() []*sandboxv1beta1.Sandbox {
	out := make([]*sandboxv1beta1.Sandbox, 0, len(in.Members))
	for _, m := range in.Members {
		if metav1.GetControllerOfNoCopy(m) != nil && !extv1beta1.IsPoolMember(m, in.Pool) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// PlanWarmPool decides a pool's reconcile: which members to delete and why
// (stale under Recreate, then the excess over replicas, not Ready first and
// then newest), each guarded by its UID and resourceVersion; which to
// create (under new random names, at most MaxBatch); what the policies
// judge first; and how it ends (warmPoolReport: status, progress events,
// when to look again). With no template it creates nothing and deletes
// only the excess. Deletes come first, then creates, then the report,
// which counts what is left once the deletes are done.
//
// The reconciler withdraws the members to delete from the warm queue
// first (WarmPoolRemovals names them): those a claim holds at that moment
// come back as Held, and the plan made again leaves them alone.
func PlanWarmPool(in WarmPoolPlanInputs) (Plan, error) {
	p := in.Pool
	if p == nil || p.Name == "" || p.Namespace == "" || p.UID == "" {
		return Plan{}, errNoPool
	}
	plan := Plan{Steps: []Step{}}
	r := removals(in)
	creates, err := newMembers(in, r)
	if errors.Is(err, errNoSuffix) {
		return Plan{}, err
	}
	if err != nil {
		// Nothing is done: only a change to the pool or template helps.
		plan.Problem = err.Error()
		plan.Steps = append(plan.Steps, warmPoolStatusStep(p, WarmPoolStatusOnFailure(in, plan.Problem), "report the problem"))
		return plan, nil
	}
	if len(creates) > 0 && in.Policies {
		checks, err := memberChecks(creates[0], in.Defaults)
		if err != nil {
			plan.Problem = "no members are created: " + err.Error()
			creates = nil
		}
		plan.Checks = checks
	}
	if in.PolicyDenied != "" {
		creates = nil
		if c := apimeta.FindStatusCondition(in.previous(), extv1beta1.ConditionReady); c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied {
			plan.Steps = append(plan.Steps, warmPoolEvent(p, corev1.EventTypeWarning, sandboxv1beta1.ReasonPolicyDenied, "Check",
				deniedMessage(in.PolicyDenied), "the policies denied the new members"))
		}
	}
	deleted := map[types.UID]bool{}
	held := false
	for i, m := range r.remove {
		if in.Held[m.UID] {
			held = true
			continue
		}
		deleted[m.UID] = true
		plan.Steps = append(plan.Steps, Step{Action: ActionDelete, Kind: "Sandbox", Namespace: m.Namespace, Name: m.Name,
			Reason:        "delete member: " + r.why[i],
			Preconditions: &Preconditions{UID: m.UID, ResourceVersion: m.ResourceVersion}, Live: m})
	}
	for _, m := range creates {
		plan.Steps = append(plan.Steps, Step{Action: ActionCreate, Kind: "Sandbox", Namespace: p.Namespace, Name: *m.Name,
			Reason: fmt.Sprintf("create member: fill to %d replicas", replicas(p)), Object: m})
	}
	report, recheck := warmPoolReport(in, plan.Problem, deleted)
	if at := metav1.NewTime(in.Now.Add(HeldRecheck)); held && (recheck == nil || at.Before(recheck)) {
		recheck = &at
	}
	plan.Steps = append(plan.Steps, report...)
	plan.RecheckAt = recheck
	return plan, nil
}

// newMembers renders the members to create: as many as the pool lacks, at
// most MaxBatch, each under a new name (MemberName with the next suffix
// from Suffix) that no Sandbox or Pod holds and no other new member got.
// Past maxNameTries suffixes a member the rest are left to a later pass.
func newMembers(in WarmPoolPlanInputs, r removalPlan) ([]*sandboxac.SandboxApplyConfiguration, error) {
	want := replicas(in.Pool)
	count := r.live + len(in.Pending)
	if count >= want || in.Template == nil {
		return nil, nil
	}
	n := want - count
	if in.MaxBatch > 0 && n > in.MaxBatch {
		n = in.MaxBatch
	}
	if in.Suffix == nil {
		return nil, errNoSuffix
	}
	used := map[string]bool{}
	for _, name := range in.Pending {
		used[name] = true
	}
	var out []*sandboxac.SandboxApplyConfiguration
	for i := 0; len(out) < n && i < n*maxNameTries; i++ {
		name := MemberName(in.Pool.Name, in.Suffix(i))
		if used[name] || (in.Taken != nil && in.Taken(name)) {
			continue
		}
		used[name] = true
		m, err := WarmPoolMember(in.WarmPoolInputs, name)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// memberChecks are what the policies judge before a pool creates members:
// one new member (every member renders alike) and what it makes.
func memberChecks(m *sandboxac.SandboxApplyConfiguration, d Defaults) ([]Check, error) {
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(m, sb); err != nil {
		return nil, fmt.Errorf("converting member %s: %w", *m.Name, err)
	}
	checks, err := NewSandboxChecks(sb, d)
	if err != nil {
		return nil, err
	}
	checks[0].Reason = "a new member (every member renders alike)"
	return checks, nil
}

func deniedMessage(denial string) string { return "no members are created: " + denial }

// HeldRecheck is how soon a pool looks again at members it did not delete
// because a claim held them.
const HeldRecheck = time.Second

// warmPoolReport is how a pool's plan ends: the status step, counting the
// members left once those in deleted are gone (written whatever the steps
// before it did), then the WarmPoolNotProgressing event when members stay
// unschedulable past the grace period (the pool holds them rather than
// replace them) or WarmPoolProgressing once none does, and when to look
// again (the first not Ready member passing the grace period). problem is
// the plan's.
func warmPoolReport(in WarmPoolPlanInputs, problem string, deleted map[types.UID]bool) ([]Step, *metav1.Time) {
	p := in.Pool
	var left []*sandboxv1beta1.Sandbox
	for _, m := range in.members() {
		if !deleted[m.UID] {
			left = append(left, m)
		}
	}
	st := in.statusInputs(left)
	switch {
	case problem != "":
		st.BlockedReason, st.BlockedMessage = extv1beta1.ReasonReconcilerError, problem
	case in.PolicyDenied != "":
		st.BlockedReason, st.BlockedMessage = sandboxv1beta1.ReasonPolicyDenied, deniedMessage(in.PolicyDenied)
	}
	steps := []Step{warmPoolStatusStep(p, WarmPoolStatus(st), "report the members left once the deletes are done")}
	switch n := WarmPoolUnschedulable(left, in.Grace, in.Now); {
	case n > 0 && !in.NotProgressingReported:
		steps = append(steps, warmPoolEvent(p, corev1.EventTypeWarning, sandboxv1beta1.EventWarmPoolNotProgressing, "Reconciling",
			WarmPoolNotProgressingMessage(n, int32(replicas(p)), in.Grace), "members stay unschedulable past the grace period"))
	case n == 0 && in.NotProgressingReported:
		steps = append(steps, warmPoolEvent(p, corev1.EventTypeNormal, sandboxv1beta1.EventWarmPoolProgressing, "Reconciling",
			"Warm pool is progressing again", "no member is unschedulable any more"))
	}
	var recheck *metav1.Time
	for _, m := range left {
		if IsSandboxReady(m) || m.DeletionTimestamp != nil {
			continue
		}
		at := m.CreationTimestamp.Add(in.Grace + time.Second)
		if at.After(in.Now) && (recheck == nil || at.Before(recheck.Time)) {
			recheck = &metav1.Time{Time: at}
		}
	}
	return steps, recheck
}

// WarmPoolStatusOnFailure is the status of a pool whose plan failed with
// a problem only a change to the pool or template fixes (the API server
// refuses its members as invalid): every observed member counted.
func WarmPoolStatusOnFailure(in WarmPoolPlanInputs, problem string) *extac.SandboxWarmPoolApplyConfiguration {
	st := in.statusInputs(in.members())
	st.BlockedReason, st.BlockedMessage = extv1beta1.ReasonReconcilerError, problem
	return WarmPoolStatus(st)
}

func (in WarmPoolPlanInputs) statusInputs(members []*sandboxv1beta1.Sandbox) WarmPoolStatusInputs {
	return WarmPoolStatusInputs{
		Pool: in.Pool, Previous: in.Previous, Members: members, TemplateMissing: in.Template == nil,
		Grace: in.Grace, Now: metav1.NewTime(in.Now.Truncate(time.Second)),
	}
}

func (in WarmPoolPlanInputs) previous() []metav1.Condition {
	if in.Previous != nil {
		return in.Previous
	}
	return in.Pool.Status.Conditions
}

func warmPoolStatusStep(p *extv1beta1.SandboxWarmPool, st *extac.SandboxWarmPoolApplyConfiguration, why string) Step {
	return Step{Action: ActionStatus, Kind: "SandboxWarmPool", Namespace: p.Namespace, Name: p.Name, Reason: why,
		Object: st, Immediate: true, Live: p}
}

func warmPoolEvent(p *extv1beta1.SandboxWarmPool, typ, reason, action, message, why string) Step {
	return Step{Action: ActionEvent, Kind: "SandboxWarmPool", Namespace: p.Namespace, Name: p.Name, Reason: why,
		Event: &Event{Type: typ, Reason: reason, Action: action, Message: message}}
}
