package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	if m := r.status.recall(claim); m != nil && m.rv != "" {
		// Our own last status write is newer than the cache.
		rv = m.rv
	}
	for range 3 {
		desired := render.ClaimStatus(in)
		desired.WithResourceVersion(rv)
		err := r.applyStatus(ctx, claim, b, desired)
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
			if b.sandbox != nil && controlledBy(b.sandbox, claim.UID) && b.sandbox.Name != other {
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
	fp := ssa.Fingerprint(desired.Status)
	if r.status.written(claim, fp) {
		r.Engine.Saved("SandboxClaimStatus", claim.Namespace, claim.Name)
		return nil
	}
	return r.applyStatus(ctx, claim, b, desired)
}

func (r *ClaimReconciler) applyStatus(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, desired *extac.SandboxClaimApplyConfiguration) error {
	fp := ssa.Fingerprint(desired.Status)
	conditions := conditionsOf(desired.Status.Conditions)
	change, err := ssa.ApplyStatus(ctx, r.Engine, "SandboxClaim", desired, claim, extac.ExtractSandboxClaimStatus)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: its status is moot, and its deletion brings a new event
	}
	if err != nil {
		return err
	}
	now := r.Clock.Now()
	if change.Action != ssa.Unchanged {
		r.status.remember(claim, fp, conditions, now)
		r.status.rememberVersion(claim, deref(desired.ResourceVersion))
	}
	if c := findCondition(conditions, extv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && !b.readyReported {
		b.readyReported = true
		if old := findCondition(claim.Status.Conditions, extv1beta1.ConditionReady); old == nil || old.Status != metav1.ConditionTrue {
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

// annotate writes the claim's annotations upstream's controller writes:
// agents.x-k8s.io/controller-first-observed-at (when this process first saw
// the claim, kept once written), agents.x-k8s.io/sandbox-name (the bound
// Sandbox, once there is one) and agents.x-k8s.io/claim-first-ready-at
// (when the claim was first reported Ready, "unknown" if before this
// process saw it; kept once written), in one request and only when one is missing
// or stale. With guard, the write is conditional on the claim's
// resourceVersion (the binding's commit follows it and must not skip a
// concurrent change); the new resourceVersion is returned, empty when
// nothing was written.
func (r *ClaimReconciler) annotate(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, name string, guard bool) (string, error) {
	observed := claim.Annotations[extv1beta1.AnnotationControllerFirstObservedAt]
	firstReady := claim.Annotations[extv1beta1.AnnotationClaimFirstReadyAt]
	if firstReady == "" {
		switch ready := findCondition(claim.Status.Conditions, extv1beta1.ConditionReady); {
		case !b.readyAt.IsZero():
			firstReady = b.readyAt.UTC().Format(time.RFC3339Nano)
		case ready != nil && ready.Status == metav1.ConditionTrue:
			// Ready before this process saw it: upstream's sentinel.
			firstReady = extv1beta1.ClaimFirstReadyUnknown
		}
	}
	if observed != "" && (name == "" || claim.Annotations[extv1beta1.AnnotationSandboxName] == name) &&
		firstReady == claim.Annotations[extv1beta1.AnnotationClaimFirstReadyAt] {
		return "", nil
	}
	if observed == "" {
		seen := b.seen
		if seen.IsZero() {
			seen = r.Clock.Now()
		}
		observed = seen.UTC().Format(time.RFC3339Nano)
	}
	annotations := map[string]string{extv1beta1.AnnotationControllerFirstObservedAt: observed}
	if firstReady != "" {
		annotations[extv1beta1.AnnotationClaimFirstReadyAt] = firstReady
	}
	if name != "" {
		annotations[extv1beta1.AnnotationSandboxName] = name
	} else if old := claim.Annotations[extv1beta1.AnnotationSandboxName]; old != "" {
		// Keep what an earlier write of ours recorded.
		annotations[extv1beta1.AnnotationSandboxName] = old
	}
	desired := extac.SandboxClaim(claim.Name, claim.Namespace).
		WithUID(claim.UID). // never recreate a claim deleted meanwhile
		WithAnnotations(annotations)
	if guard {
		rv := claim.ResourceVersion
		if m := r.status.recall(claim); m != nil && m.rv != "" {
			rv = m.rv
		}
		desired.WithResourceVersion(rv)
	}
	_, err := ssa.Apply(ctx, r.Engine, "SandboxClaim", desired, claim, extac.ExtractSandboxClaim, ssa.Options{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ssa.IsConflict(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return deref(desired.ResourceVersion), nil
}
