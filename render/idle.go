package render

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IdleDecision is what idle suspend does with one Sandbox at one moment.
type IdleDecision struct {
	// Timeout is the Sandbox's idle timeout; zero when idle suspend does
	// not apply to it now (not asked for, being deleted, an unclaimed warm
	// member, not Running, not Ready, or a status that has not caught up
	// with the spec).
	Timeout time.Duration
	// Since is when the Sandbox was last known busy: the latest of its
	// last-activity annotation, its Ready condition's last transition, the
	// last resume through the router, the SDK or idle suspend's own field
	// manager (resumedAt), and its creation.
	Since time.Time
	// Suspend: the Sandbox has been idle for Timeout; suspend it now.
	Suspend bool
	// After, when Timeout is set and Suspend is not, is how long until
	// the Sandbox may be idle long enough.
	After time.Duration
}

// IdleDeadline decides whether a Sandbox has been idle for its idle
// timeout (the agents.x-k8s.io/idle-timeout annotation) at now. Only a
// Running, Ready Sandbox that is not being deleted and is not an unclaimed
// warm-pool member is ever suspended, and not on a Ready condition that
// observed an older generation than the Sandbox's (one that says none,
// written by another client, is taken as it is): a Sandbox resumed moments
// after a suspend still shows the Ready condition it had before the
// suspend until the controller reports again, and that stale condition
// (with its old transition time) must not suspend it a second time. An
// invalid resume annotation is an error, and nothing is suspended then.
func IdleDeadline(sb *sandboxv1beta1.Sandbox, now time.Time) (IdleDecision, error) {
	var d IdleDecision
	p, err := sandboxv1beta1.ResumePolicyOf(sb.Annotations)
	if err != nil {
		return d, err
	}
	mode := sb.Spec.OperatingMode
	ready := apimeta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
	switch {
	case p.IdleTimeout <= 0, sb.DeletionTimestamp != nil, extv1beta1.IsUnclaimedWarmMember(sb),
		mode != "" && mode != sandboxv1beta1.SandboxOperatingModeRunning,
		ready == nil || ready.Status != metav1.ConditionTrue,
		ready.ObservedGeneration != 0 && ready.ObservedGeneration < sb.Generation:
		return d, nil
	}
	d.Timeout = p.IdleTimeout
	d.Since = sb.CreationTimestamp.Time
	if t := ready.LastTransitionTime.Time; t.After(d.Since) {
		d.Since = t
	}
	if t, ok := resumedAt(sb); ok && t.After(d.Since) {
		d.Since = t
	}
	if v, ok := sb.Annotations[sandboxv1beta1.AnnotationLastActivity]; ok {
		// Written by the router and the SDK; a value that does not parse
		// says nothing about activity.
		if t, err := time.Parse(time.RFC3339, v); err == nil && t.After(d.Since) {
			d.Since = t
		}
	}
	deadline := d.Since.Add(d.Timeout)
	if !now.Before(deadline) {
		d.Suspend = true
		return d, nil
	}
	d.After = deadline.Sub(now)
	return d, nil
}

// resumedAt is when FieldManagerOperatingMode (the router's and the SDK's
// resumes, idle suspend's suspends) last set spec.operatingMode, the one
// field it owns, rounded up to the next second (managedFields keep whole
// seconds), if the mode is Running. A resume is activity: a Sandbox
// resumed before the controller reported its suspend keeps the Ready
// condition (and transition time) it had before, which alone would make
// it look idle since then.
func resumedAt(sb *sandboxv1beta1.Sandbox) (time.Time, bool) {
	if sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeRunning {
		return time.Time{}, false
	}
	t, ok := sandboxv1beta1.AppliedAt(sb, sandboxv1beta1.FieldManagerOperatingMode)
	return t.Add(time.Second), ok
}
