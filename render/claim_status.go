package render

import (
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// ClaimExpiredMessage is the Ready message of an expired claim, upstream's.
const ClaimExpiredMessage = "Claim expired. Sandbox cleanup initiated."

// ErrorSeenPrefix starts the message of every ReconcilerError, as upstream's.
const ErrorSeenPrefix = "Error seen: "

// ClaimStatusInputs are the observations a claim's status is derived from.
type ClaimStatusInputs struct {
	// Claim whose status is rendered.
	Claim *extv1beta1.SandboxClaim
	// Previous are the conditions last reported; nil means the claim's own.
	Previous []metav1.Condition
	// SandboxName is the Sandbox bound to the claim, empty when none is.
	SandboxName string
	// Sandbox is the bound Sandbox as observed, nil when it is not seen.
	Sandbox *sandboxv1beta1.Sandbox
	// Pending reports that the bound Sandbox was created moments ago and is
	// not observed yet.
	Pending bool
	// Rejection, when set, is why the claim cannot be served.
	Rejection *ClaimRejection
	// Expired reports that the claim passed its expiry; ExpiredMessage says
	// what was done about it.
	Expired        bool
	ExpiredMessage string
	// Now stamps conditions whose status changed.
	Now metav1.Time
}

// ClaimStatus renders a claim's status: Ready (the claim's own reasons, or
// its Sandbox's Ready forwarded), Finished mirrored from the Sandbox, and the
// Sandbox's name and Pod IPs.
func ClaimStatus(in ClaimStatusInputs) *extac.SandboxClaimApplyConfiguration {
	c := in.Claim
	previous := in.Previous
	if previous == nil {
		previous = c.Status.Conditions
	}
	conds := conditionSet{existing: previous, generation: c.Generation, now: in.Now}
	sb := in.Sandbox
	const ready = extv1beta1.ConditionReady
	switch {
	case in.Expired:
		msg := in.ExpiredMessage
		if msg == "" {
			msg = ClaimExpiredMessage
		}
		conds.set(ready, metav1.ConditionFalse, extv1beta1.ReasonClaimExpired, msg)
	case in.Rejection != nil:
		msg := in.Rejection.Message
		if in.Rejection.Reason == extv1beta1.ReasonReconcilerError && !strings.HasPrefix(msg, ErrorSeenPrefix) {
			msg = ErrorSeenPrefix + msg
		}
		conds.set(ready, metav1.ConditionFalse, in.Rejection.Reason, msg)
	case sb == nil && in.Pending:
		// Bound moments ago, not in the cache yet: upstream's wait for
		// the cache after its create.
		conds.set(ready, metav1.ConditionFalse, extv1beta1.ReasonSandboxCreatePending,
			"Sandbox already created; waiting for cache to converge")
	case sb == nil:
		conds.set(ready, metav1.ConditionFalse, extv1beta1.ReasonSandboxMissing, "Sandbox does not exist")
	default:
		r := apimeta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
		switch {
		case r == nil:
			conds.set(ready, metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, "Sandbox is not ready")
		case r.Reason == sandboxv1beta1.ReasonSandboxExpired:
			conds.set(ready, metav1.ConditionFalse, extv1beta1.ReasonSandboxExpired,
				"Underlying Sandbox resource has expired independently of the Claim.")
		default:
			// Forwarded verbatim, transition time included, as upstream
			// does; only observedGeneration is the claim's.
			conds.out = append(conds.out, metav1ac.Condition().
				WithType(ready).WithStatus(r.Status).WithReason(r.Reason).WithMessage(r.Message).
				WithObservedGeneration(c.Generation).WithLastTransitionTime(r.LastTransitionTime))
		}
	}

	var finished *metav1.Condition
	if sb != nil {
		finished = apimeta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionFinished)
	} else if in.Expired {
		// The Sandbox may be gone after expiry; keep what was mirrored.
		finished = apimeta.FindStatusCondition(previous, extv1beta1.ConditionFinished)
	}
	if finished != nil {
		// Mirrored verbatim, as upstream does: the Sandbox's
		// observedGeneration and transition time (the claim's TTL counts
		// from when the Sandbox finished).
		conds.out = append(conds.out, metav1ac.Condition().
			WithType(extv1beta1.ConditionFinished).WithStatus(finished.Status).
			WithReason(finished.Reason).WithMessage(finished.Message).
			WithObservedGeneration(finished.ObservedGeneration).WithLastTransitionTime(finished.LastTransitionTime))
	}

	st := extac.SandboxClaimStatus().WithConditions(conds.out...)
	if in.SandboxName != "" && (!in.Expired || sb != nil) {
		claimed := extac.ClaimedSandbox().WithName(in.SandboxName)
		if sb != nil {
			claimed.WithPodIPs(sb.Status.PodIPs...)
		}
		st.WithSandbox(claimed)
	}
	return extac.SandboxClaim(c.Name, c.Namespace).WithStatus(st)
}

// FinishedAt is when a Sandbox's Finished condition became True, zero if
// it has not.
func FinishedAt(conds []metav1.Condition) metav1.Time {
	if c := apimeta.FindStatusCondition(conds, sandboxv1beta1.ConditionFinished); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime
	}
	return metav1.Time{}
}

// ClaimAnnotations is the step that writes the annotations upstream's
// controller writes on a claim, nil when none is missing or stale:
// agents.x-k8s.io/controller-first-observed-at (seen, when the controller
// first saw the claim; kept once written), agents.x-k8s.io/sandbox-name
// (the bound Sandbox name, once there is one; an earlier value is kept
// while name is empty) and agents.x-k8s.io/claim-first-ready-at (readyAt,
// when the controller first reported the claim Ready, or "unknown" when
// it was Ready before the controller saw it; kept once written). It is an
// annotate step (an apply of those annotations only, under the annotation
// manager), guarded by the claim's UID so a claim deleted meanwhile is
// never recreated.
func ClaimAnnotations(c *extv1beta1.SandboxClaim, name string, seen, readyAt time.Time) *Step {
	observed := c.Annotations[extv1beta1.AnnotationControllerFirstObservedAt]
	firstReady := c.Annotations[extv1beta1.AnnotationClaimFirstReadyAt]
	if firstReady == "" {
		switch ready := apimeta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady); {
		case !readyAt.IsZero():
			firstReady = readyAt.UTC().Format(time.RFC3339Nano)
		case ready != nil && ready.Status == metav1.ConditionTrue:
			// Ready before the controller saw it: upstream's sentinel.
			firstReady = extv1beta1.ClaimFirstReadyUnknown
		}
	}
	if observed != "" && (name == "" || c.Annotations[extv1beta1.AnnotationSandboxName] == name) &&
		firstReady == c.Annotations[extv1beta1.AnnotationClaimFirstReadyAt] {
		return nil
	}
	if observed == "" {
		observed = seen.UTC().Format(time.RFC3339Nano)
	}
	annotations := map[string]string{extv1beta1.AnnotationControllerFirstObservedAt: observed}
	if firstReady != "" {
		annotations[extv1beta1.AnnotationClaimFirstReadyAt] = firstReady
	}
	if name != "" {
		annotations[extv1beta1.AnnotationSandboxName] = name
	} else if old := c.Annotations[extv1beta1.AnnotationSandboxName]; old != "" {
		// Keep what an earlier write recorded.
		annotations[extv1beta1.AnnotationSandboxName] = old
	}
	return &Step{Action: ActionAnnotate, Kind: "SandboxClaim", Namespace: c.Namespace, Name: c.Name, Live: c,
		Object: extac.SandboxClaim(c.Name, c.Namespace).WithUID(c.UID).WithAnnotations(annotations),
		Reason: "record when the claim was first seen and first Ready, and its Sandbox, as upstream does"}
}
