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

// commit writes the status that binds a claim to its new Sandbox, guarded by
// the claim's resourceVersion: the commit point of a binding. Should another
// controller have bound the claim first (two replicas while leader election
// overlaps), the write fails, the claim is read again, and the Sandbox bound
// here, never reported to anyone, is removed. It reports whether this
// binding stands.
func (r *ClaimReconciler) commit(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, in render.ClaimStatusInputs) (bool, error) {
	rv := claim.ResourceVersion
	if m, ok := claimStatus.recall(&r.memory, claim); ok && m.ResourceVersion != "" {
		// Our own last status write is newer than the cache.
		rv = m.ResourceVersion
	}
	for range 3 {
		desired := render.ClaimStatus(in)
		desired.WithResourceVersion(rv)
		err := r.applyStatus(ctx, claim, b, desired, true)
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
		if other := live.Status.Sandbox.Name; other != "" && other != b.name {
			log.FromContext(ctx).Info("another controller bound the claim first; releasing ours", "sandbox", b.name, "kept", other)
			if b.sandbox != nil && metav1.IsControlledBy(b.sandbox, claim) && b.sandbox.Name != other {
				if _, err := r.Engine.DeleteIfUnchanged(ctx, "Sandbox", b.sandbox); err != nil {
					return false, err
				}
			}
			b.name, b.sandbox, b.at = other, nil, r.Clock.Now()
			return false, nil
		}
		in.Claim, rv = live, live.ResourceVersion
	}
	return true, fmt.Errorf("binding status of claim %s kept conflicting", claim.Name)
}

func (r *ClaimReconciler) writeStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, desired *extac.SandboxClaimApplyConfiguration) error {
	return r.applyStatus(ctx, claim, b, desired, false)
}

// applyStatus writes a claim's status through the status writer (with
// always, even when it is what we wrote last) and keeps the binding's
// account of the claim's first Ready.
func (r *ClaimReconciler) applyStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, desired *extac.SandboxClaimApplyConfiguration, always bool) error {
	conditions := conditionsOf(desired.Status.Conditions)
	switch done, err := claimStatus.write(ctx, r.statuses(), claim, desired, statusWrite{reported: conditions, always: always}); {
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

// annotate writes the claim's annotations upstream's controller writes
// (render.ClaimAnnotations: first observed, sandbox name, first Ready), in
// one request and only when one is missing or stale. With guard, the
// write is conditional on the claim's resourceVersion (the binding's
// commit follows it and must not skip a concurrent change); the new
// resourceVersion is returned, empty when nothing was written.
func (r *ClaimReconciler) annotate(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, name string, guard bool) (string, error) {
	seen := b.seen
	if seen.IsZero() {
		seen = r.Clock.Now()
	}
	step := render.ClaimAnnotations(claim, name, seen, b.readyAt)
	if step == nil {
		return "", nil
	}
	desired := step.Object.(*extac.SandboxClaimApplyConfiguration)
	if guard {
		rv := claim.ResourceVersion
		if m, ok := claimStatus.recall(&r.memory, claim); ok && m.ResourceVersion != "" {
			rv = m.ResourceVersion
		}
		desired.WithResourceVersion(rv)
	}
	return r.writeAnnotations(ctx, *step)
}

// writeAnnotations carries out the annotations step of a claim: a claim
// deleted or changed meanwhile (the guard) is left alone.
func (r *ClaimReconciler) writeAnnotations(ctx context.Context, step render.Step) (string, error) {
	_, err := execute(ctx, r.Engine, step)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ssa.IsConflict(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return deref(step.Object.(*extac.SandboxClaimApplyConfiguration).ResourceVersion), nil
}
