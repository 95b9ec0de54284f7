package render

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// claimExpiry plans what happens to an expired claim, as its
// shutdownPolicy says: Delete and DeleteForeground report the claim
// expired, then delete it (garbage collection takes its Sandbox), guarded
// by its UID; Retain (the default) deletes the claim's Sandbox, guarded by
// UID and resourceVersion (never one it does not control, nor one going
// already), and keeps the claim, reporting ClaimExpired. The ClaimExpired
// event is recorded once, when the claim is not reported expired yet. A
// second Sandbox a concurrent controller bound the claim to goes first, as
// for a claim not expired (secondSandboxDeletes).
func claimExpiry(in ClaimPlanInputs) Plan {
	c := in.Claim
	// A second Sandbox goes first, as for a claim not expired.
	plan := Plan{Steps: secondSandboxDeletes(in)}
	if !expiredBefore(c) {
		plan.Steps = append(plan.Steps, claimEvent(c, corev1.EventTypeNormal, sandboxv1beta1.EventClaimExpired, "Claim Expired",
			"Claim expired", "the claim passed its expiry", nil))
	}
	st := in.statusInputs()
	st.Pending, st.Sandbox, st.Expired = false, nil, true
	if sb := in.Sandbox; sb != nil && extv1beta1.IsClaimedBy(sb, c) {
		// Reported (name, Pod IPs, Finished) until the Sandbox is gone.
		st.Sandbox = sb
	} else if in.NotOwned != "" {
		st.ExpiredMessage, st.SandboxName = in.NotOwned, ""
	}
	policy := extv1beta1.ShutdownPolicyRetain
	if c.Spec.Lifecycle != nil && c.Spec.Lifecycle.ShutdownPolicy != "" {
		policy = c.Spec.Lifecycle.ShutdownPolicy
	}
	switch policy {
	case extv1beta1.ShutdownPolicyDelete, extv1beta1.ShutdownPolicyDeleteForeground:
		propagation := metav1.DeletePropagationBackground
		if policy == extv1beta1.ShutdownPolicyDeleteForeground {
			propagation = metav1.DeletePropagationForeground
		}
		// As upstream: the expired status first, then the claim goes.
		plan.Steps = append(plan.Steps,
			claimStatusStep(c, ClaimStatus(st), true, "report the claim expired before it goes"),
			claimEvent(c, corev1.EventTypeNormal, sandboxv1beta1.EventClaimExpired, "Deleting",
				fmt.Sprintf("Deleting Claim (ShutdownPolicy=%s)", policy), "the shutdownPolicy deletes the claim", nil),
			Step{Action: ActionDelete, Kind: "SandboxClaim", Namespace: c.Namespace, Name: c.Name, Live: c,
				Preconditions: &Preconditions{UID: c.UID}, Propagation: &propagation,
				Reason: fmt.Sprintf("shutdownPolicy %s: the claim goes, and garbage collection takes its Sandbox", policy)})
		return plan
	}
	if sb := st.Sandbox; sb != nil && sb.DeletionTimestamp == nil {
		background := metav1.DeletePropagationBackground
		plan.Steps = append(plan.Steps, Step{Action: ActionDelete, Kind: "Sandbox", Namespace: sb.Namespace, Name: sb.Name, Live: sb,
			Preconditions: &Preconditions{UID: sb.UID, ResourceVersion: sb.ResourceVersion}, Propagation: &background,
			Reason: "shutdownPolicy Retain: the claim's Sandbox goes, the claim stays"})
	}
	plan.Steps = append(plan.Steps, claimStatusStep(c, ClaimStatus(st), true, "report the claim expired"))
	return plan
}

// statusInputs are the claim's status inputs as observed.
func (in ClaimPlanInputs) statusInputs() ClaimStatusInputs {
	return ClaimStatusInputs{
		Claim: in.Claim, Previous: in.Previous, Now: metav1.NewTime(in.Now.Truncate(time.Second)),
		SandboxName: in.SandboxName, Sandbox: in.Sandbox, Pending: in.Pending,
	}
}

func claimStatusStep(c *extv1beta1.SandboxClaim, st *extac.SandboxClaimApplyConfiguration, immediate bool, why string) Step {
	return Step{Action: ActionStatus, Kind: "SandboxClaim", Namespace: c.Namespace, Name: c.Name, Reason: why,
		Object: st, Immediate: immediate, Live: c}
}

// claimEvent is an event about claim c; related, when not nil, is the
// Sandbox it concerns.
func claimEvent(c *extv1beta1.SandboxClaim, typ, reason, action, message, why string, related *sandboxv1beta1.Sandbox) Step {
	e := &Event{Type: typ, Reason: reason, Action: action, Message: message}
	if related != nil {
		e.Related, e.RelatedObject = "Sandbox/"+related.Name, runtime.Object(related)
	}
	return Step{Action: ActionEvent, Kind: "SandboxClaim", Namespace: c.Namespace, Name: c.Name, Reason: why, Event: e}
}
