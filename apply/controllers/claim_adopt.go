package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// outcomeUnknown reports an error after which a write may or may not have
// been made: no answer from the API server (a connection lost, a timeout),
// or an answer that it failed while processing the request.
func outcomeUnknown(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// readTaken reads member m past the cache after a take whose outcome is
// unknown: the member as read when the claim took it (live), or, when it
// is known not taken (gone, another object, or not the claim's), nil and
// known; an error when it cannot be read. An m without a UID is the
// claim's own Sandbox after a create whose outcome is unknown: it is the
// claim's when one of its name exists that the claim controls.
func (r *ClaimReconciler) readTaken(ctx context.Context, claim *extv1beta1.SandboxClaim, m *sandboxv1beta1.Sandbox) (live *sandboxv1beta1.Sandbox, known bool, err error) {
	got := &sandboxv1beta1.Sandbox{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), got); {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	if (m.UID == "" || got.UID == m.UID) && extv1beta1.IsClaimedBy(got, claim) {
		return got, true, nil
	}
	return nil, true, nil
}

// resolveUncertain settles a write whose outcome this process does not
// know (binding.uncertain: a take, or the create of the claim's own
// Sandbox) before the claim binds anything: the Sandbox, if the write was
// made, else nil; an error while it cannot be read.
func (r *ClaimReconciler) resolveUncertain(ctx context.Context, claim *extv1beta1.SandboxClaim, b *binding, now time.Time) (*sandboxv1beta1.Sandbox, error) {
	m := b.uncertain
	what, launch := "the take of warm Sandbox", sandboxv1beta1.LaunchTypeWarm
	if m.UID == "" {
		what, launch = "the create of the claim's Sandbox", sandboxv1beta1.LaunchTypeCold
	}
	live, _, err := r.readTaken(ctx, claim, m)
	if err != nil {
		return nil, fmt.Errorf("%s %s may have been made, and reading it failed: %w", what, m.Name, err)
	}
	b.uncertain = nil
	if live == nil {
		log.FromContext(ctx).Info("a write whose answer was lost was not made", "write", what, "sandbox", m.Name)
		return nil, nil
	}
	log.FromContext(ctx).Info("a write whose answer was lost was made", "write", what, "sandbox", m.Name)
	bindTo(b, live, launch, now)
	return live, nil
}
