package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// commit carries out render.PlanClaimBinding: the binding annotations, then
// the status that binds the claim to its new Sandbox, both guarded by the
// claim's resourceVersion (the one our own last write left, newer than the
// cache, else the claim's): the commit point of a binding. A conflict has
// the claim read again and the plan made again from it: should another
// controller have bound the claim first (two replicas while leader
// election overlaps), that plan removes the Sandbox bound here, never
// reported to anyone. It reports whether this binding stands.
func (r *ClaimReconciler) commit(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimPlanInputs) (bool, error) {
	if m, ok := claimStatus.recall(&r.memory.status, claim); ok && m.resourceVersion != "" {
		// Our own last status write is newer than the cache.
		in.Version = m.resourceVersion
	}
	for range 3 {
		plan, boundTo := render.PlanClaimBinding(in)
		if boundTo != in.SandboxName {
			log.FromContext(ctx).Info("another controller bound the claim first; releasing ours", "sandbox", in.SandboxName, "kept", boundTo)
			for _, s := range plan.Steps {
				if _, err := execute(ctx, r.Engine, s); err != nil {
					return false, err
				}
			}
			b.name, b.sandbox, b.at = boundTo, nil, r.Clock.Now()
			return false, nil
		}
		err := r.executeBinding(ctx, claim, b, plan)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			// The Sandbox is bound (it names the claim as controller); the
			// next pass finds it and writes the status.
			return true, err
		}
		live := &extv1beta1.SandboxClaim{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), live); err != nil {
			return true, client.IgnoreNotFound(err)
		}
		in.Claim, in.Version = live, ""
	}
	return true, fmt.Errorf("binding status of claim %s kept conflicting", claim.Name)
}

// executeBinding carries out the steps of a binding's plan: its annotations
// (a failure is logged, a conflict or a claim gone leaves them for the next
// pass), whose write's resourceVersion then guards the status, and the
// status, sent even when it is what we wrote last.
func (r *ClaimReconciler) executeBinding(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, plan render.Plan) error {
	guard, next := "", ""
	for _, s := range plan.Steps {
		desired, _ := s.Object.(*extac.SandboxClaimApplyConfiguration)
		switch {
		case desired == nil:
			return fmt.Errorf("binding step %s %s holds %T", s.Action, s.Name, s.Object)
		case s.Action == render.ActionAnnotate:
			guard = deref(desired.ResourceVersion)
			rv, err := r.writeAnnotations(ctx, s)
			if err != nil {
				log.FromContext(ctx).V(1).Info("annotations not updated", "error", err)
			} else if rv != "" {
				claim.ResourceVersion, next = rv, rv
				claimStatus.rememberVersion(&r.memory.status, claim, rv)
			}
		case s.Action == render.ActionStatus:
			if next != "" && deref(desired.ResourceVersion) == guard {
				// Our annotations' write moved the claim on: the status
				// is guarded by the version it left.
				desired.WithResourceVersion(next)
			}
			if err := r.applyStatus(ctx, claim, b, desired, true); err != nil {
				return err
			}
		default:
			return fmt.Errorf("a binding's plan holds a %s step", s.Action)
		}
	}
	return nil
}

func (r *ClaimReconciler) writeStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, desired *extac.SandboxClaimApplyConfiguration) error {
	return r.applyStatus(ctx, claim, b, desired, false)
}

// applyStatus writes a claim's status through the status writer (with
// always, even when it is what we wrote last) and keeps the binding's
// account of the claim's first Ready.
func (r *ClaimReconciler) applyStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, desired *extac.SandboxClaimApplyConfiguration, always bool) error {
	conditions := conditionsOf(desired.Status.Conditions)
	switch done, err := claimStatus.write(ctx, r.statuses(), claim, desired, statusWrite[[]metav1.Condition]{reported: conditions, always: always}); {
	case err != nil:
		return err
	case done == statusRemembered || done == statusGone:
		return nil
	}
	now := r.Clock.Now()
	if c := apimeta.FindStatusCondition(conditions, extv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && !b.readyReported {
		b.readyReported = true
		if old := apimeta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ConditionReady); old == nil || old.Status != metav1.ConditionTrue {
			seen := b.seen
			if seen.IsZero() {
				seen = now
			}
			metrics.ObserveClaimReady(claim.CreationTimestamp.Time, seen, now, b.launchType, templateOf(b.sandbox))
			if b.readyAt.IsZero() {
				b.readyAt = now
			}
		}
	}
	return nil
}

func templateOf(sb *sandboxv1beta1.Sandbox) string {
	if sb == nil {
		return ""
	}
	return sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef]
}

// annotationsLag is how long after writing a claim's annotations a cached
// claim without them is taken for one the cache has not caught up with
// yet: a reconcile soon after the binding (its adopted Sandbox's events
// come first) would otherwise write the same annotations again, one
// request in two claims of a burst. Past it, the cache is believed.
const annotationsLag = ssa.CreateExpectation

// writeAnnotations carries out the annotations step of a claim: a claim
// deleted or changed meanwhile (the guard) is left alone. An unguarded
// step asking for the annotations this process wrote moments ago is
// skipped (annotationsLag); the binding's guarded one is always sent.
func (r *ClaimReconciler) writeAnnotations(ctx context.Context, step render.Step) (string, error) {
	desired := step.Object.(*extac.SandboxClaimApplyConfiguration)
	claim, _ := step.Live.(*extv1beta1.SandboxClaim)
	intent := ssa.IntentOf(desired.Annotations)
	if claim != nil && desired.ResourceVersion == nil {
		if last, ok := r.memory.annotations.Recall(client.ObjectKeyFromObject(claim), claim.UID); ok && last.within(intent, r.Clock.Now(), annotationsLag) {
			r.Engine.Saved("SandboxClaim", claim.Namespace, claim.Name)
			return "", nil
		}
	}
	_, err := execute(ctx, r.Engine, step)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ssa.IsConflict(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if claim != nil {
		r.memory.annotations.Remember(client.ObjectKeyFromObject(claim), claim.UID, sent{value: intent, at: r.Clock.Now()})
	}
	return deref(desired.ResourceVersion), nil
}
