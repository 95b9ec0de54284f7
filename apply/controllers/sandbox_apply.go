package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// run carries out a Sandbox's plan through the executor, after the policy
// checks. What depends on carrying it out stays here: API errors and
// conflicts, a policy denial, the memory of what this process last wrote
// (the pod-name patch, the drift reported, status), and the status write
// coalescing window.
func (r *SandboxReconciler) run(ctx context.Context, in render.SandboxPlanInputs, plan render.Plan, now time.Time) (reconcile.Result, error) {
	sb := in.Sandbox
	if err := r.admit(ctx, sb, plan.Checks); err != nil {
		return r.failed(ctx, in, err)
	}
	var result reconcile.Result
	once := false // a drift event is in the plan
	x := executor{
		engine: r.Engine,
		event: func(s render.Step) {
			if s.Event.Once {
				once = true
				if !r.driftReported(sb, s.Event.Message) {
					return
				}
			}
			r.Recorder.Eventf(sb, s.Event.RelatedObject, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
		},
		status: func(ctx context.Context, s render.Step, changes ssa.ChangeSet) (bool, error) {
			desired, ok := s.Object.(*sandboxac.SandboxApplyConfiguration)
			if !ok {
				return true, fmt.Errorf("plan status step holds %T", s.Object)
			}
			if s.Immediate {
				return true, r.writeStatus(ctx, sb, desired)
			}
			if !once {
				r.driftReported(sb, "")
			}
			var err error
			result, err = r.settle(ctx, sb, plan, desired, changes, in.Pod, now)
			return true, err
		},
		own: func(ctx context.Context, s render.Step) (*ssa.Change, bool, error) {
			if s.Kind == "Sandbox" && s.Action == render.ActionAnnotate {
				return nil, true, r.trackPodName(ctx, sb, s)
			}
			return nil, false, nil
		},
	}
	done, err := x.run(ctx, plan)
	if err != nil && done.failed.Kind != "Sandbox" && done.failed.Action != render.ActionStatus {
		// A child not applied: reported on the Sandbox.
		return r.failed(ctx, in, err)
	}
	// The Sandbox's own steps: its deletion (its status is then moot),
	// its pod-name annotation, its status.
	return result, err
}

// admit checks what the plan would create or adopt against the policies,
// in the policy modes of the Sandbox's namespace.
func (r *SandboxReconciler) admit(ctx context.Context, sb *sandboxv1beta1.Sandbox, checks []render.Check) error {
	set := r.Policy.Get()
	if set == nil || len(checks) == 0 {
		return nil
	}
	began := time.Now()
	inNS, _ := r.Policy.In(ctx, sb.Namespace)
	ds, err := checkPlanned(inNS, set, checks)
	metrics.PolicySeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
	if err != nil {
		return err
	}
	if warned := policy.Warned(ds); len(warned) > 0 && r.Recorder != nil {
		// The namespace's mode lets it through with a warning (the
		// webhook showed the same at kubectl apply time).
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPolicyWarning, "Check", "%s", policy.Summary(warned))
	}
	return nil
}

// failed reports a plan that was not carried out: a policy denial (nothing
// was applied), or an error applying a child (not everything was). A
// denial, a field conflict and an invalid object are terminal once
// reported: only a change can fix them.
func (r *SandboxReconciler) failed(ctx context.Context, in render.SandboxPlanInputs, err error) (reconcile.Result, error) {
	sb := in.Sandbox
	var denied *policyError
	if errors.As(err, &denied) {
		// Only a change to the Sandbox or to the policies (which re-checks
		// everything) can fix this.
		if readyReason(sb) != sandboxv1beta1.ReasonPolicyDenied {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPolicyDenied, "Check", "%s", denied.Error())
		}
		return reconcile.Result{}, terminal(err, r.writeStatus(ctx, sb, render.SandboxStatusOnFailure(in, "", denied.Error())))
	}
	var conflict *ssa.ConflictError
	if errors.As(err, &conflict) || apierrors.IsInvalid(err) {
		// Only a change to the Sandbox or to another manager's fields (both
		// watched) can fix this: the same request would be refused again.
		// Report it; do not fight over fields and do not retry with backoff.
		if conflict != nil && readyReason(sb) != sandboxv1beta1.ReasonReconcilerError {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventFieldConflict, "Apply", "%s", conflict.Error())
		}
		return reconcile.Result{}, terminal(err, r.writeStatus(ctx, sb, render.SandboxStatusOnFailure(in, err.Error(), "")))
	}
	if namespaceTerminating(err) {
		// Everything here is about to go: nothing to report.
		return reconcile.Result{}, err
	}
	if serr := r.writeStatus(ctx, sb, render.SandboxStatusOnFailure(in, err.Error(), "")); serr != nil {
		log.FromContext(ctx).V(1).Info("status not updated", "error", serr)
	}
	return reconcile.Result{}, err
}

// settle ends a plan whose steps all ran: the status is written only when
// they changed nothing, and a transitional one may wait (deferStatus).
func (r *SandboxReconciler) settle(ctx context.Context, sb *sandboxv1beta1.Sandbox, plan render.Plan,
	desired *sandboxac.SandboxApplyConfiguration, changes ssa.ChangeSet, pod *corev1.Pod, now time.Time) (reconcile.Result, error) {
	result := after(plan, changes.Pending(), ssa.CreateExpectation, now)
	if changes.Changed() {
		// Every object we just changed is watched; its event brings us back
		// with fresh observations, and status is written then. This saves a
		// status write per change.
		r.changedChildren(sb, now)
		log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
		return result, nil
	}
	if wait := r.deferStatus(sb, desired, pod, now); wait > 0 {
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
		return result, nil
	}
	return result, r.writeStatus(ctx, sb, desired)
}

// podVersion is the resourceVersion of the Sandbox's Pod, "" for none.
func podVersion(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.ResourceVersion
}

// podNameShown forgets the pod-name annotation this process sent for sb
// once the cache shows it: the memory only stands in for a cache that
// lags, and the plan sends no annotate step for a value already shown.
func (r *SandboxReconciler) podNameShown(sb *sandboxv1beta1.Sandbox) {
	shown := sb.Annotations[sandboxv1beta1.AnnotationPodName]
	r.memory.podName.ForgetIf(client.ObjectKeyFromObject(sb), func(m sent) bool { return m.value == shown })
}

// trackPodName carries out the plan's pod-name annotate step, unless
// this process sent the same one moments ago and the cache has not shown
// it yet.
func (r *SandboxReconciler) trackPodName(ctx context.Context, sb *sandboxv1beta1.Sandbox, s render.Step) error {
	want := ""
	if ac, ok := s.Object.(*sandboxac.SandboxApplyConfiguration); ok {
		want = ac.Annotations[sandboxv1beta1.AnnotationPodName]
	}
	k := client.ObjectKeyFromObject(sb)
	now := r.Clock.Now()
	if m, ok := r.memory.podName.Recall(k, sb.UID); ok && m.within(want, now, ssa.CreateExpectation) {
		return nil // patched moments ago; the cache has not shown it yet
	}
	if _, err := execute(ctx, r.Engine, s); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.memory.podName.Remember(k, sb.UID, sent{value: want, at: now})
	return nil
}
