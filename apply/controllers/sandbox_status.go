package controllers

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
)

// deferStatus says how long to wait before writing desired, or zero to write
// now. A status that reaches a resting state (Ready, suspended, finished,
// expired, failed) is written at once, and so is one that is what we wrote
// last (nothing is sent). A transitional one (a Pod pending, being
// scheduled or being deleted) is held until StatusCoalesceWindow after our
// last write for the Sandbox, and the deferred reconcile writes whatever is
// true by then. A Pod that becomes Ready within the window thus costs one
// status write instead of three, and so does a suspend. While many
// Sandboxes wait so (a burst), it is held until the burst is over, within a
// bound unless its Pod is only waiting its turn (statusBacklog.hold). pod
// is the Sandbox's Pod as observed (nil for none): a held Sandbox whose Pod
// moved (a new resourceVersion) shows the burst making progress.
func (r *SandboxReconciler) deferStatus(sb *sandboxv1beta1.Sandbox, desired *sandboxac.SandboxApplyConfiguration, pod *corev1.Pod, now time.Time) time.Duration {
	if r.StatusCoalesceWindow < 0 || !transitional(desired) {
		return 0
	}
	if sandboxStatus.remembered(&r.memory.status, sb, desired) {
		// Written already (a Pod that stays Pending): nothing to hold, and
		// it must not count as a burst.
		return 0
	}
	if wait := r.backlog.hold(r.StatusCoalesceWindow, r.lastWrite(sb), now, podWaitsItsTurn(pod, now)); wait > 0 {
		// No longer waiting once writeStatus writes it (or forget).
		r.backlog.wait(client.ObjectKeyFromObject(sb), podVersion(pod), r.StatusCoalesceWindow, now)
		return wait
	}
	return 0
}

// transitional reports a status on the way to a resting state: not Ready
// only because the Pod is still starting, or suspended with the Pod still
// terminating.
func transitional(desired *sandboxac.SandboxApplyConfiguration) bool {
	var ready, suspended *metav1ac.ConditionApplyConfiguration
	for i := range desired.Status.Conditions {
		switch c := &desired.Status.Conditions[i]; *c.Type {
		case sandboxv1beta1.ConditionReady:
			ready = c
		case sandboxv1beta1.ConditionSuspended:
			suspended = c
		case sandboxv1beta1.ConditionFinished:
			return false
		}
	}
	if ready == nil || *ready.Status == metav1.ConditionTrue {
		return false
	}
	switch *ready.Reason {
	case sandboxv1beta1.ReasonDependenciesNotReady:
		return true
	case sandboxv1beta1.ReasonSandboxSuspended:
		return suspended != nil && *suspended.Status != metav1.ConditionTrue
	}
	return false
}

// writeStatus writes sb's status through the status writer, remembering
// it as reported, and observes a new Sandbox's first Ready.
func (r *SandboxReconciler) writeStatus(ctx context.Context, sb *sandboxv1beta1.Sandbox, desired *sandboxac.SandboxApplyConfiguration) error {
	r.backlog.done(client.ObjectKeyFromObject(sb)) // no longer waiting, whatever the write's outcome
	reported := &sandboxv1beta1.SandboxStatus{Conditions: conditionsOf(desired.Status.Conditions)}
	if s := desired.Status; s != nil {
		reported.Service, reported.ServiceFQDN, reported.LabelSelector = deref(s.Service), deref(s.ServiceFQDN), deref(s.LabelSelector)
	}
	firstReady := r.becomesReadyFirstTime(sb, reported.Conditions)
	done, err := sandboxStatus.write(ctx, r.statuses(), sb, desired, statusWrite[*sandboxv1beta1.SandboxStatus]{reported: reported})
	if done == statusWritten && firstReady {
		metrics.ObserveReady(sb, r.Clock.Now())
	}
	if done == statusWritten && !transitional(desired) {
		r.backlog.progress(r.Clock.Now()) // a burst, if any, makes progress
	}
	return err
}

// becomesReadyFirstTime reports a status that makes a new Sandbox Ready for
// the first time: nothing reported Ready before, and the spec never changed
// (generation 1), so a resume is not mistaken for a creation.
func (r *SandboxReconciler) becomesReadyFirstTime(sb *sandboxv1beta1.Sandbox, next []metav1.Condition) bool {
	if sb.Generation != 1 {
		return false
	}
	if c := apimeta.FindStatusCondition(r.reported(sb), sandboxv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		return false
	}
	c := apimeta.FindStatusCondition(next, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

func readyReason(sb *sandboxv1beta1.Sandbox) string {
	if c := statusCondition(sb, sandboxv1beta1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func statusCondition(sb *sandboxv1beta1.Sandbox, t string) *metav1.Condition {
	return apimeta.FindStatusCondition(sb.Status.Conditions, t)
}
