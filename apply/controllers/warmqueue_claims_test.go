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
// took, and moved less than RefillMaxDelay ago) and shortly after a take;
// claims that stand still for RefillMaxDelay hold it back no more, and
// claims that keep moving hold it back for RefillMaxHold in a row at most.
func TestRefillWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := NewWarmQueue()
	q.now = func() time.Time { return now }
	r := &WarmPoolReconciler{Queue: q, RefillQuiet: 50 * time.Millisecond, RefillMaxDelay: time.Second, RefillMaxHold: 3 * time.Second}
	p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pool-uid"}}
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	if w := r.refillWait(p, now); w != 0 {
		t.Fatalf("refill waits %v with no claims", w)
	}
	q.ClaimHandler().OnAdd(waitingClaim("a", "p"), false)
	if w := r.refillWait(p, now); w != 50*time.Millisecond {
		t.Fatalf("refill waits %v while a claim that just came waits, want the quiet period", w)
	}
	// A claim that stands still (its controller does not serve it) holds
	// nothing back.
	now = now.Add(time.Second)
	if w := r.refillWait(p, now); w != 0 {
		t.Fatalf("refill waits %v for a claim that stood still for RefillMaxDelay", w)
	}
	// Updates that leave it waiting are no moves.
	q.ClaimHandler().OnUpdate(waitingClaim("a", "p"), waitingClaim("a", "p"))
	if w := r.refillWait(p, now); w != 0 {
		t.Fatalf("refill waits %v after an update that left the claim waiting", w)
	}
	q.Handler().OnAdd(member("m1", "p", true), false)
	q.Handler().OnAdd(member("m2", "p", true), false)
	q.Handler().OnAdd(member("m3", "p", true), false)
	// A take is a move: the refill waits while the claim's commit is
	// written, even with the queue empty of what it could take.
	if q.Take(key, nil) == nil {
		t.Fatal("no member taken")
	}
	now = now.Add(20 * time.Millisecond)
	if w := r.refillWait(p, now); w != 50*time.Millisecond {
		t.Fatalf("refill waits %v while the taking claim commits, want the quiet period", w)
	}
	// The claim is bound and no other waits: the refill waits for the rest
	// of the quiet period after the take, then goes ahead.
	bound := waitingClaim("a", "p")
	bound.Status.Sandbox.Name = "m1"
	q.ClaimHandler().OnUpdate(waitingClaim("a", "p"), bound)
	if w := r.refillWait(p, now); w != 30*time.Millisecond {
		t.Fatalf("refill waits %v 20ms after a take, want 30ms", w)
	}
	now = now.Add(30 * time.Millisecond)
	if w := r.refillWait(p, now); w != 0 {
		t.Fatalf("refill waits %v past the quiet period", w)
	}
	// Claims that keep moving hold the refill back for RefillMaxHold at
	// most.
	for i := range 30 {
		q.ClaimHandler().OnAdd(waitingClaim(fmt.Sprintf("c%d", i), "p"), false)
		if w := r.refillWait(p, now); w != 50*time.Millisecond {
			t.Fatalf("after %d moves 100ms apart: refill waits %v, want the quiet period", i, w)
		}
		now = now.Add(100 * time.Millisecond)
	}
	q.ClaimHandler().OnAdd(waitingClaim("last", "p"), false)
	if w := r.refillWait(p, now); w != 0 {
		t.Fatalf("refill waits %v after RefillMaxHold", w)
	}
}
