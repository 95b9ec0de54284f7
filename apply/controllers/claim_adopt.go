package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// EventAdoptionRefused is the Warning event on a claim whose warm adoption
// the API server refused (Forbidden or Invalid); the claim cold-starts.
const EventAdoptionRefused = sandboxv1beta1.EventAdoptionRefused

// maxAdoptionAttempts bounds the members one claim takes from the queue
// before it cold-starts instead.
const maxAdoptionAttempts = 8

// offers are the Ready members a pool's queue offers one claim, taken one
// at a time (render.ClaimMayTake says which it may have); none when accept
// is nil. A member taken and not adopted is given back for other claims.
type offers struct {
	r      *ClaimReconciler
	claim  *extv1beta1.SandboxClaim
	pool   types.NamespacedName
	accept func(*sandboxv1beta1.Sandbox) bool
	taken  int
}

// next takes the next member the queue offers the claim, nil when it has
// none (or the claim took maxAdoptionAttempts). What runs is judged too: a
// member whose Pod the policies deny is not handed out, and its pool
// replaces it (passOver).
func (o *offers) next(ctx context.Context) (*sandboxv1beta1.Sandbox, error) {
	for o.accept != nil && o.taken < maxAdoptionAttempts {
		o.taken++
		m := o.r.Queue.Take(o.pool, o.accept)
		if m == nil {
			return nil, nil
		}
		switch denial, err := o.r.memberPodDenied(ctx, o.claim, m); {
		case err != nil:
			o.r.Queue.Return(m)
			return nil, err
		case denial != "":
			o.r.passOver(ctx, o.claim, m, denial)
			continue
		}
		return m, nil
	}
	return nil, nil
}

// giveBack returns a member taken but not adopted to the queue.
func (o *offers) giveBack(m *sandboxv1beta1.Sandbox) {
	if m != nil {
		o.r.Queue.Return(m)
	}
}

// failed deals with the adoption of member m that the API server answered
// with err, and returns the member to plan with next: the next one offered
// when m is gone, or changed and no longer one the claim may take; m as
// read now (again: once) when it changed since it was judged (another claim
// may have taken it, its pool may be deleting it, or only its status moved
// on); none, with the reason, when the API server refused the adoption
// (Forbidden or Invalid: retrying the same patch cannot succeed; the
// member stays warm for others and the claim gets a Sandbox of its own).
func (o *offers) failed(ctx context.Context, m *sandboxv1beta1.Sandbox, retried bool, err error) (next *sandboxv1beta1.Sandbox, again bool, refused string, _ error) {
	switch {
	case retried:
		o.giveBack(m)
	case apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		live := &sandboxv1beta1.Sandbox{}
		if gerr := o.r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), live); gerr != nil {
			if !apierrors.IsNotFound(gerr) {
				o.giveBack(m)
			}
			break
		}
		if !claimable(live) || !o.accept(live) {
			o.giveBack(live)
			break
		}
		// The same member, judged already: planned again as read now,
		// guarded by its new resourceVersion.
		return live, true, "", nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		o.giveBack(m)
		log.FromContext(ctx).Info("adopting a warm Sandbox was refused; creating one instead", "sandbox", m.Name, "reason", apierrors.ReasonForError(err))
		return nil, false, string(apierrors.ReasonForError(err)), nil
	default:
		o.giveBack(m)
		return nil, false, "", fmt.Errorf("adopting Sandbox %s: %w", m.Name, err)
	}
	next, err = o.next(ctx)
	return next, false, "", err
}
