package render

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// WarmPoolStatusInputs are the observations a pool's status is derived from.
type WarmPoolStatusInputs struct {
	// Pool whose status is rendered.
	Pool *extv1beta1.SandboxWarmPool
	// Previous are the conditions last reported; nil means the pool's own.
	Previous []metav1.Condition
	// Members are the Sandboxes the pool controls.
	Members []*sandboxv1beta1.Sandbox
	// TemplateMissing reports that the pool's template does not exist.
	TemplateMissing bool
	// Blocked, when not empty, is why the pool cannot create members
	// (reason and message), such as a policy denial or a reconcile error.
	BlockedReason, BlockedMessage string
	// Grace is how long a member may take to become Ready before the pool
	// reports it as not progressing.
	Grace time.Duration
	// Now stamps changed conditions and measures the grace period.
	Now metav1.Time
}

// WarmPoolStatus renders a pool's status: member counts, the selector of its
// members, and the Ready and Progressing conditions.
func WarmPoolStatus(in WarmPoolStatusInputs) *extac.SandboxWarmPoolApplyConfiguration {
	p := in.Pool
	previous := in.Previous
	if previous == nil {
		previous = p.Status.Conditions
	}
	var replicas, ready int32
	var slow, unschedulable []string
	for _, m := range in.Members {
		if m.DeletionTimestamp != nil {
			continue
		}
		replicas++
		if IsSandboxReady(m) {
			ready++
			continue
		}
		if c := apimeta.FindStatusCondition(m.Status.Conditions, sandboxv1beta1.ConditionPodScheduled); c != nil &&
			c.Status == metav1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			unschedulable = append(unschedulable, m.Name)
			continue
		}
		if in.Grace > 0 && in.Now.Sub(m.CreationTimestamp.Time) > in.Grace {
			slow = append(slow, m.Name)
		}
	}
	want := int32(1)
	if p.Spec.Replicas != nil {
		want = *p.Spec.Replicas
	}
	conds := conditionSet{existing: previous, generation: p.Generation, now: in.Now}
	switch {
	case in.TemplateMissing:
		conds.set(extv1beta1.ConditionReady, metav1.ConditionFalse, extv1beta1.ReasonTemplateNotFound,
			fmt.Sprintf("SandboxTemplate %s does not exist; existing members are kept and no new ones are made until it does", p.Spec.TemplateRef.Name))
	case in.BlockedReason != "":
		conds.set(extv1beta1.ConditionReady, metav1.ConditionFalse, in.BlockedReason, in.BlockedMessage)
	case ready >= want && replicas == want:
		conds.set(extv1beta1.ConditionReady, metav1.ConditionTrue, extv1beta1.ReasonWarmPoolReady,
			fmt.Sprintf("%d of %d members are Ready", ready, want))
	default:
		conds.set(extv1beta1.ConditionReady, metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotReady,
			fmt.Sprintf("%d of %d members are Ready", ready, want))
	}
	switch {
	case len(unschedulable) > 0:
		conds.set(extv1beta1.ConditionProgressing, metav1.ConditionFalse, extv1beta1.ReasonMembersUnschedulable,
			fmt.Sprintf("the Pods of %d members cannot be scheduled: %s", len(unschedulable), listNames(unschedulable)))
	case len(slow) > 0:
		conds.set(extv1beta1.ConditionProgressing, metav1.ConditionFalse, extv1beta1.ReasonMembersNotReady,
			fmt.Sprintf("%d members are not Ready after %s: %s", len(slow), in.Grace, listNames(slow)))
	default:
		conds.set(extv1beta1.ConditionProgressing, metav1.ConditionTrue, extv1beta1.ReasonMembersProgressing,
			"members become Ready")
	}
	st := extac.SandboxWarmPoolStatus().
		WithReplicas(replicas).
		WithReadyReplicas(ready).
		WithSelector(PoolSelector(p.Name)).
		WithObservedGeneration(p.Generation).
		WithConditions(conds.out...)
	return extac.SandboxWarmPool(p.Name, p.Namespace).WithStatus(st)
}

// listNames lists up to five names, sorted as given, and how many more.
func listNames(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// WarmPoolUnschedulable counts the members upstream's controller holds
// rather than replaces: not Ready past the grace period, with a Pod that
// cannot be scheduled (PodScheduled False, reason Unschedulable).
func WarmPoolUnschedulable(members []*sandboxv1beta1.Sandbox, grace time.Duration, now time.Time) int32 {
	var n int32
	for _, m := range members {
		if m.DeletionTimestamp != nil || IsSandboxReady(m) || now.Sub(m.CreationTimestamp.Time) <= grace {
			continue
		}
		if c := apimeta.FindStatusCondition(m.Status.Conditions, sandboxv1beta1.ConditionPodScheduled); c != nil &&
			c.Status == metav1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			n++
		}
	}
	return n
}

// WarmPoolNotProgressingMessage is the note of the WarmPoolNotProgressing
// event, upstream's text.
func WarmPoolNotProgressingMessage(unschedulable, desired int32, grace time.Duration) string {
	return fmt.Sprintf("%d/%d sandboxes are unschedulable past the %s readiness grace period; holding them instead of replacing (replacements would be equally unschedulable)",
		unschedulable, desired, grace)
}
