package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// EventAdoptionRefused is the Warning event on a claim whose warm adoption
// the API server refused (Forbidden or Invalid); the claim cold-starts.
const EventAdoptionRefused = "AdoptionRefused"

// maxAdoptionAttempts bounds the members one claim tries before it
// cold-starts instead.
const maxAdoptionAttempts = 8

// adoptWarm takes a Ready member of the pool for the claim. It returns nil
// when the pool has none to give, or none this claim may have (a refused
// adoption falls back to a cold start rather than retrying forever).
func (r *ClaimReconciler) adoptWarm(ctx context.Context, claim *extv1beta1.SandboxClaim, pool *extv1beta1.SandboxWarmPool) (*sandboxv1beta1.Sandbox, *render.ClaimRejection, error) {
	key := client.ObjectKeyFromObject(pool)
	if r.Queue.Len(key) == 0 {
		return nil, nil, nil
	}
	accept, tmpl, err := r.acceptor(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	for range maxAdoptionAttempts {
		m := r.Queue.Take(key, accept)
		if m == nil {
			return nil, nil, nil
		}
		if rej, err := r.checkAdoption(ctx, claim, tmpl, m); rej != nil || err != nil {
			r.Queue.Return(m)
			return nil, rej, err
		}
		sb, err := r.adopt(ctx, claim, tmpl, m)
		switch {
		case err == nil:
			return sb, nil, nil
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// The member changed since the cache saw it: another claim
			// may have taken it, its pool may be deleting it, or only its
			// status moved on. Look again.
			live := &sandboxv1beta1.Sandbox{}
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); gerr != nil {
				if !apierrors.IsNotFound(gerr) {
					r.Queue.Return(m)
				}
				continue
			}
			if !claimable(live) || !accept(live) {
				r.Queue.Return(live)
				continue
			}
			if sb, err := r.adopt(ctx, claim, tmpl, live); err == nil {
				return sb, nil, nil
			}
			r.Queue.Return(live)
			continue
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// Refused by admission (a webhook or a ValidatingAdmission
			// Policy on Sandbox updates) or by validation: retrying the
			// same patch cannot succeed. The member stays warm for others
			// and the claim gets a Sandbox of its own.
			r.Queue.Return(m)
			log.FromContext(ctx).Info("adopting a warm Sandbox was refused; creating one instead", "sandbox", m.Name, "reason", apierrors.ReasonForError(err))
			r.Recorder.Eventf(claim, m, corev1.EventTypeWarning, EventAdoptionRefused, "Adopt",
				"taking warm Sandbox %s was refused (%s); creating a Sandbox for the claim instead", m.Name, apierrors.ReasonForError(err))
			return nil, nil, nil
		default:
			r.Queue.Return(m)
			return nil, nil, fmt.Errorf("adopting Sandbox %s: %w", m.Name, err)
		}
	}
	return nil, nil, nil
}

// acceptor says which of the pool's queued members a claim may take: only
// members of this pool (not of an earlier pool of the same name) that the
// pool is not about to delete, as stale under Recreate or as excess over
// its replicas, by the same decision the pool makes (render.WarmPoolRemovals).
// It also returns the pool's template (nil when it does not exist).
func (r *ClaimReconciler) acceptor(ctx context.Context, pool *extv1beta1.SandboxWarmPool) (func(*sandboxv1beta1.Sandbox) bool, *extv1beta1.SandboxTemplate, error) {
	tmpl := &extv1beta1.SandboxTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl); {
	case apierrors.IsNotFound(err):
		tmpl = nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading template: %w", err)
	}
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingFields{IndexControllerUID: string(pool.UID)}); err != nil {
		return nil, nil, fmt.Errorf("listing members: %w", err)
	}
	members := make([]*sandboxv1beta1.Sandbox, len(list.Items))
	for i := range list.Items {
		members[i] = &list.Items[i]
	}
	doomed := map[types.UID]bool{}
	for _, m := range render.WarmPoolRemovals(render.WarmPoolPlanInputs{
		WarmPoolInputs: render.WarmPoolInputs{Pool: pool, Template: tmpl},
		Members:        members,
	}) {
		doomed[m.UID] = true
	}
	return func(sb *sandboxv1beta1.Sandbox) bool {
		return controlledBy(sb, pool.UID) && sb.DeletionTimestamp == nil && !doomed[sb.UID]
	}, tmpl, nil
}

// checkAdoption runs the policies on the Sandbox a member becomes once the
// claim takes it (its pod template with the claim's additional metadata,
// the resume annotations of tmpl and the claim): a claim cannot get past a
// policy by taking a warm member instead of creating one.
func (r *ClaimReconciler) checkAdoption(ctx context.Context, claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate, m *sandboxv1beta1.Sandbox) (*render.ClaimRejection, error) {
	if rej := render.MetadataConflict(m.Spec.PodTemplate.ObjectMeta, claim.Spec.AdditionalPodMetadata); rej != nil {
		return rej, nil
	}
	adopted := render.Adopted(claim, tmpl, m)
	var denied *policyError
	var terminal *terminalError
	err := checkNewSandbox(ctx, r.Policy, adopted, render.CurrentDefaults(r.Defaults))
	if errors.As(err, &denied) {
		return &render.ClaimRejection{Reason: extv1beta1.ReasonPolicyDenied, Message: denied.Error()}, nil
	} else if errors.As(err, &terminal) {
		return &render.ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: terminal.Error()}, nil
	} else if err != nil {
		return nil, err
	}
	return nil, nil
}

// adopt moves a member from its pool to the claim, guarded by the member's
// resourceVersion.
func (r *ClaimReconciler) adopt(ctx context.Context, claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate, m *sandboxv1beta1.Sandbox) (*sandboxv1beta1.Sandbox, error) {
	patch, err := render.Adoption(claim, tmpl, m)
	if err != nil {
		return nil, err
	}
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	if _, err := r.Engine.Patch(ctx, "Sandbox", sb, client.RawPatch(types.MergePatchType, patch), r.Engine.FieldManager()); err != nil {
		return nil, err
	}
	return sb, nil
}
