package render

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimCommit plans the commit of a new binding: in.Sandbox, named
// in.SandboxName, was just adopted or created for in.Claim (as its write
// returns it; nil when not known). The plan records the binding
// annotations (the Sandbox's name, when the claim was first seen and, for a
// Ready Sandbox, first Ready), then writes the status naming the Sandbox,
// both guarded by the claim's resourceVersion (in.Version, else the
// claim's): the status is the commit point, and another controller's
// binding fails it. The annotations go first, so a status reporting the
// claim Ready never comes before them; a reconciler carries the
// resourceVersion the annotations' write returned on to the status.
//
// When the claim, read again after such a failure, names another Sandbox,
// another controller bound it first (ClaimBoundTo): the plan writes nothing
// to the claim and deletes in.Sandbox, which was never reported to anyone,
// guarded by its UID and resourceVersion, and only when the claim controls
// it, it is not the Sandbox the claim names and it is not going already.
func claimCommit(in ClaimPlanInputs) []Step {
	c := in.Claim
	var steps []Step
	if other := ClaimBoundTo(in); other != in.SandboxName {
		if sb := in.Sandbox; sb != nil && sb.Name == in.SandboxName && deletableSecond(sb, c, other) {
			steps = append(steps, sandboxDelete(sb,
				fmt.Sprintf("another controller bound the claim to %s first: the Sandbox bound here was never reported to anyone", other)))
		}
		return steps
	}
	rv := in.Version
	if rv == "" {
		rv = c.ResourceVersion
	}
	readyAt := in.ReadyAt
	if readyAt.IsZero() && in.Sandbox != nil && IsSandboxReady(in.Sandbox) {
		// The status below reports the claim Ready (a Ready warm member).
		readyAt = in.Now
	}
	if a := ClaimAnnotations(c, in.SandboxName, in.seen(), readyAt); a != nil {
		if rv != "" {
			a.Object.(*extac.SandboxClaimApplyConfiguration).WithResourceVersion(rv)
		}
		a.Reason = "record the binding before the status that may report the claim Ready, guarded by the claim's resourceVersion"
		steps = append(steps, *a)
	}
	st := in.statusInputs()
	st.Pending = in.Sandbox == nil
	status := ClaimStatus(st)
	if rv != "" {
		status.WithResourceVersion(rv)
	}
	return append(steps, claimStatusStep(c, status, true,
		"commit the binding: guarded by the claim's resourceVersion, so another controller's binding fails it"))
}

// ClaimBoundTo is the Sandbox a claim whose binding to in.SandboxName is
// being committed is bound to: in.SandboxName, or the one another
// controller bound it to first, as the claim's status names it.
func ClaimBoundTo(in ClaimPlanInputs) string {
	if other := in.Claim.Status.Sandbox.Name; other != "" {
		return other
	}
	return in.SandboxName
}

// claimRejection are the steps that report why an unbound claim
// cannot be served: the annotations recording when the claim was first
// seen (upstream writes them at the start of its first reconcile), then
// the status reporting rej.
func claimRejection(in ClaimPlanInputs, rej *ClaimRejection) []Step {
	var steps []Step
	if a := ClaimAnnotations(in.Claim, "", in.seen(), in.ReadyAt); a != nil {
		steps = append(steps, *a)
	}
	st := in.statusInputs()
	st.Rejection = rej
	return append(steps, claimStatusStep(in.Claim, ClaimStatus(st), true, "report why the claim cannot be served"))
}

// secondSandboxDeletes removes the Sandboxes in.Others that a concurrent
// controller bound the claim to (two replicas while leader election
// overlapped), once the claim's status names the bound one, the winner:
// the others were never reported to anyone. Never the bound Sandbox, one
// this process bound moments ago (in.Holding), one the claim does not
// control or one going already; each delete is guarded by UID and
// resourceVersion.
func secondSandboxDeletes(in ClaimPlanInputs) []Step {
	c := in.Claim
	if in.SandboxName == "" || c.Status.Sandbox.Name != in.SandboxName {
		return nil
	}
	var steps []Step
	for _, sb := range in.Others {
		if sb.Name == in.Holding || !deletableSecond(sb, c, in.SandboxName) {
			continue
		}
		steps = append(steps, sandboxDelete(sb, fmt.Sprintf(
			"a second Sandbox bound to the claim by a concurrent controller; the claim's status names %s", in.SandboxName)))
	}
	return steps
}

// deletableSecond says whether sb may go as a second Sandbox of claim c,
// which is bound to the Sandbox named bound: c controls it, it is not the
// bound one, it is not going already, and it can be guarded.
func deletableSecond(sb *sandboxv1beta1.Sandbox, c *extv1beta1.SandboxClaim, bound string) bool {
	return sb.Name != bound && extv1beta1.IsClaimedBy(sb, c) && sb.DeletionTimestamp == nil &&
		sb.UID != "" && sb.ResourceVersion != ""
}

func sandboxDelete(sb *sandboxv1beta1.Sandbox, why string) Step {
	return Step{Action: ActionDelete, Kind: "Sandbox", Namespace: sb.Namespace, Name: sb.Name, Live: sb,
		Preconditions: &Preconditions{UID: sb.UID, ResourceVersion: sb.ResourceVersion}, Reason: why}
}

// seen is when the controller first saw the claim: Now when not known.
func (in ClaimPlanInputs) seen() time.Time {
	if in.Seen.IsZero() {
		return in.Now
	}
	return in.Seen
}

// reportsReady says whether a claim status reports the claim Ready.
func reportsReady(st *extac.SandboxClaimApplyConfiguration) bool {
	if st.Status == nil {
		return false
	}
	for _, c := range st.Status.Conditions {
		if c.Type != nil && *c.Type == extv1beta1.ConditionReady {
			return c.Status != nil && *c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func isReady(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, extv1beta1.ConditionReady)
}
