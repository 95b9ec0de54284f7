package controllers

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func member(name, pool string, ready bool) *sandboxv1beta1.Sandbox {
	yes := true
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool", Name: pool, UID: "pool-uid", Controller: &yes}}},
		Status: sandboxv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: status}}},
	}
}

// TestWarmQueueOffersOnlyOurPoolsMembers: a Ready Sandbox whose controller
// reference says SandboxWarmPool under another API group is not a member
// of the pool of that name: the queue never offers it.
func TestWarmQueueOffersOnlyOurPoolsMembers(t *testing.T) {
	q := NewWarmQueue()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	forged := member("forged", "p", true)
	forged.OwnerReferences[0].APIVersion = "evil.example.com/v1"
	q.Handler().OnAdd(forged, false)
	if got := q.Take(pool, nil); got != nil {
		t.Fatalf("the queue offered %s, controlled by a SandboxWarmPool of another group", got.Name)
	}
	q.Handler().OnAdd(member("real", "p", true), false)
	if got := q.Take(pool, nil); got == nil || got.Name != "real" {
		t.Fatalf("Take gave %v, want the pool's own member", got)
	}
}

func TestWarmQueue(t *testing.T) {
	q := NewWarmQueue()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return now }
	h := q.Handler()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}

	h.OnAdd(member("a", "p", false), false)
	if q.Len(pool) != 0 {
		t.Fatal("a member that is not Ready is offered")
	}
	h.OnUpdate(nil, member("a", "p", true))
	h.OnAdd(member("b", "p", true), false)
	h.OnAdd(member("c", "other", true), false)
	if q.Len(pool) != 2 {
		t.Fatalf("%d members offered, want 2", q.Len(pool))
	}
	if got := q.Take(pool, nil); got == nil || got.Name != "a" {
		t.Fatalf("Take gave %v, want the member Ready first (a)", got)
	}
	// The informer still shows a as a Ready member (the adoption is in
	// flight): it is not offered again.
	h.OnUpdate(nil, member("a", "p", true))
	if got := q.Take(pool, nil); got == nil || got.Name != "b" {
		t.Fatalf("Take gave %v, want b", got)
	}
	if got := q.Take(pool, nil); got != nil {
		t.Fatalf("Take gave %s from an empty pool", got.Name)
	}
	if !q.LastTake(pool).Equal(now) {
		t.Errorf("LastTake %v, want %v", q.LastTake(pool), now)
	}
	// A member handed out but not adopted goes back.
	q.Return(member("b", "p", true))
	if q.Len(pool) != 1 {
		t.Fatalf("returned member not offered")
	}
	// Leaving the pool (adopted by a claim) or going away removes it.
	adopted := member("b", "p", true)
	adopted.OwnerReferences[0].Kind = "SandboxClaim"
	h.OnUpdate(nil, adopted)
	if q.Len(pool) != 0 {
		t.Fatal("an adopted member is still offered")
	}
	h.OnAdd(member("d", "p", true), false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/d", Obj: member("d", "p", true)})
	if q.Len(pool) != 0 {
		t.Fatal("a deleted member is still offered")
	}
	// After the hold, a member taken but never adopted is offered again.
	now = now.Add(takenHold + time.Second)
	h.OnUpdate(nil, member("a", "p", true))
	if q.Len(pool) != 1 {
		t.Fatal("a member taken long ago and still in the pool is not offered again")
	}
}

func TestWarmQueueTakesEachMemberOnce(t *testing.T) {
	q := NewWarmQueue()
	h := q.Handler()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	for i := range 100 {
		h.OnAdd(member(string(rune('A'+i%26))+string(rune('a'+i/26)), "p", true), false)
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for sb := q.Take(pool, nil); sb != nil; sb = q.Take(pool, nil) {
				mu.Lock()
				got[sb.Name]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 100 {
		t.Errorf("%d members handed out, want 100", len(got))
	}
	for name, n := range got {
		if n != 1 {
			t.Errorf("%s handed out %d times", name, n)
		}
	}
}

// TestWarmQueueReleasesWithoutAnEvent: a member taken but never adopted, of
// which the informer sends no further event, is offered again once the hold
// runs out, not only after a resync.
func TestWarmQueueReleasesWithoutAnEvent(t *testing.T) {
	q := NewWarmQueue()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return now }
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	q.Handler().OnAdd(member("a", "p", true), false)
	if q.Take(pool, nil) == nil {
		t.Fatal("nothing to take")
	}
	if q.Len(pool) != 0 {
		t.Fatal("a held member is offered")
	}
	now = now.Add(takenHold + time.Second)
	if got := q.Take(pool, nil); got == nil || got.Name != "a" {
		t.Fatalf("after the hold, Take gave %v, want a", got)
	}
}

// TestWarmQueueWithdraw: the pool withdraws a member before deleting it, so
// no claim takes it; a member a claim holds cannot be withdrawn.
func TestWarmQueueWithdraw(t *testing.T) {
	q := NewWarmQueue()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	h := q.Handler()
	a, b := member("a", "p", true), member("b", "p", true)
	h.OnAdd(a, false)
	h.OnAdd(b, false)
	if !q.Withdraw(a) {
		t.Fatal("a queued member could not be withdrawn")
	}
	// The informer shows a again (status moved on): still withdrawn.
	h.OnUpdate(nil, member("a", "p", true))
	taken := q.Take(pool, nil)
	if taken == nil || taken.Name != "b" {
		t.Fatalf("Take gave %v, want b (a is withdrawn)", taken)
	}
	if q.Take(pool, nil) != nil {
		t.Fatal("a withdrawn member was handed to a claim")
	}
	if q.Withdraw(b) {
		t.Fatal("a member a claim holds was withdrawn for deletion")
	}
	// The delete did not happen: a is offered again.
	q.Restore(a)
	if got := q.Take(pool, nil); got == nil || got.Name != "a" {
		t.Fatalf("after Restore, Take gave %v, want a", got)
	}
	// A claim returning b makes it withdrawable and takable again.
	q.Return(b)
	if !q.Withdraw(b) {
		t.Fatal("a returned member could not be withdrawn")
	}
}

// TestWarmQueueTakeAccepts: members the claim may not have (stale, excess)
// are skipped and stay queued.
func TestWarmQueueTakeAccepts(t *testing.T) {
	q := NewWarmQueue()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	h := q.Handler()
	for _, n := range []string{"a", "b", "c"} {
		h.OnAdd(member(n, "p", true), false)
	}
	notA := func(sb *sandboxv1beta1.Sandbox) bool { return sb.Name != "a" }
	if got := q.Take(pool, notA); got == nil || got.Name != "b" {
		t.Fatalf("Take gave %v, want b", got)
	}
	if q.Len(pool) != 2 {
		t.Fatalf("%d queued, want 2 (a skipped, not dropped)", q.Len(pool))
	}
	none := func(*sandboxv1beta1.Sandbox) bool { return false }
	if got := q.Take(pool, none); got != nil {
		t.Fatalf("Take gave %s though nothing is acceptable", got.Name)
	}
}
