package controllers

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

func waitingClaim(name, pool string) *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("claim-" + name)},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool}},
	}
}

// TestWarmQueueWaitingClaims: a claim waits for a member of its pool from
// its creation until it is bound, reported on, deleted or being deleted.
func TestWarmQueueWaitingClaims(t *testing.T) {
	q := NewWarmQueue()
	h := q.ClaimHandler()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	a, b := waitingClaim("a", "p"), waitingClaim("b", "p")
	h.OnAdd(a, false)
	h.OnAdd(b, false)
	h.OnAdd(waitingClaim("c", "other"), false)
	if n := q.Waiting(pool); n != 2 {
		t.Fatalf("%d claims wait for p, want 2", n)
	}
	bound := a.DeepCopy()
	bound.Status.Sandbox.Name = "p-abcde"
	h.OnUpdate(a, bound)
	refused := b.DeepCopy()
	refused.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonWarmPoolNotFound}}
	h.OnUpdate(b, refused)
	if n := q.Waiting(pool); n != 0 {
		t.Fatalf("%d claims wait for p once bound or reported on, want 0", n)
	}
	d := waitingClaim("d", "p")
	h.OnAdd(d, false)
	deleting := d.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	h.OnUpdate(d, deleting)
	e := waitingClaim("e", "p")
	h.OnAdd(e, false)
	h.OnDelete(e)
	if n := q.Waiting(pool); n != 0 {
		t.Fatalf("%d claims wait for p once deleted, want 0", n)
	}
}

// TestRefillWait: the refill waits while a burst of claims is served from
// the pool (claims wait, for a member or for the commit of the one they
// took, they moved less than RefillMaxDelay ago, and the pool has members
// left or one was taken less than RefillMaxDelay ago) and shortly after a
// take; claims that stand still, or are left with nothing to take, hold it
// back no more, and claims that keep moving hold it back for
// RefillMaxHold in a row at most.
func TestRefillWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := NewWarmQueue()
	q.now = func() time.Time { return now }
	r := &WarmPoolReconciler{Queue: q, RefillQuiet: 50 * time.Millisecond, RefillMaxDelay: time.Second, RefillMaxHold: 3 * time.Second}
	p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pool-uid"}}
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	wait := func(what string, want time.Duration) {
		t.Helper()
		if w := r.refillWait(p, now); w != want {
			t.Fatalf("%s: refill waits %v, want %v", what, w, want)
		}
	}
	wait("no claims", 0)
	q.ClaimHandler().OnAdd(waitingClaim("a", "p"), false)
	wait("a claim with nothing to take", 0)
	q.Handler().OnAdd(member("m1", "p", true), false)
	q.Handler().OnAdd(member("m2", "p", true), false)
	q.Handler().OnAdd(member("m3", "p", true), false)
	wait("a claim that just came, with members to take", 50*time.Millisecond)
	// A claim that stands still (its controller does not serve it) holds
	// nothing back; updates that leave it waiting are no moves.
	now = now.Add(time.Second)
	wait("a claim that stood still for RefillMaxDelay", 0)
	q.ClaimHandler().OnUpdate(waitingClaim("a", "p"), waitingClaim("a", "p"))
	wait("after an update that left the claim waiting", 0)
	// A take is a move.
	if q.Take(key, nil) == nil {
		t.Fatal("no member taken")
	}
	now = now.Add(20 * time.Millisecond)
	wait("while the taking claim commits", 50*time.Millisecond)
	// The claim is bound and no other waits: the refill waits for the rest
	// of the quiet period after the take, then goes ahead.
	bound := waitingClaim("a", "p")
	bound.Status.Sandbox.Name = "m1"
	q.ClaimHandler().OnUpdate(waitingClaim("a", "p"), bound)
	wait("20ms after a take", 30*time.Millisecond)
	now = now.Add(30 * time.Millisecond)
	wait("past the quiet period", 0)
	// Claims that keep moving hold the refill back for RefillMaxHold at
	// most.
	for i := range 30 {
		q.ClaimHandler().OnAdd(waitingClaim(fmt.Sprintf("c%d", i), "p"), false)
		wait(fmt.Sprintf("after %d moves 100ms apart", i), 50*time.Millisecond)
		now = now.Add(100 * time.Millisecond)
	}
	q.ClaimHandler().OnAdd(waitingClaim("last", "p"), false)
	wait("after RefillMaxHold", 0)
	// The members are all taken: the claims committing them hold the
	// refill back; once the last take is RefillMaxDelay old, the claims
	// still coming have nothing to take, and the refill goes ahead.
	for q.Take(key, nil) != nil {
	}
	wait("the last members just taken", 50*time.Millisecond)
	now = now.Add(time.Second)
	q.ClaimHandler().OnAdd(waitingClaim("more", "p"), false)
	wait("claims left with nothing to take", 0)
}

// TestWarmQueueServes: claims are being served while one of some pool
// waits and moved less than claimCommitWait ago; claims that stood still
// longer, and claims bound, are not.
func TestWarmQueueServes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := NewWarmQueue()
	q.now = func() time.Time { return now }
	h := q.ClaimHandler()
	if q.Serves() {
		t.Fatal("serving with no claim")
	}
	h.OnAdd(waitingClaim("a", "p"), false)
	if !q.Serves() {
		t.Fatal("not serving a claim that just came")
	}
	now = now.Add(claimCommitWait)
	if q.Serves() {
		t.Fatal("serving a claim that stood still for claimCommitWait")
	}
	h.OnAdd(waitingClaim("b", "other"), false)
	if !q.Serves() {
		t.Fatal("not serving another pool's claim that just came")
	}
	bound := waitingClaim("b", "other")
	bound.Status.Sandbox.Name = "m1"
	h.OnUpdate(waitingClaim("b", "other"), bound)
	if q.Serves() {
		t.Fatal("serving once the only moving claim is bound")
	}
}
