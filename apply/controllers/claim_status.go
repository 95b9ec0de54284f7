package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

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
