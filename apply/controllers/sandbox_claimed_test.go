package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// claimScheme knows Sandboxes and the extensions' kinds.
func claimScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{sandboxv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// TestAwaitClaimCommit: the reconcile of a warm Sandbox a claim took
// moments ago waits while the claim waits for its commit, and only then:
// not for a cold start, a claim bound or reported on, another claim of
// the same name, or past claimCommitWait.
func TestAwaitClaimCommit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	scheme := claimScheme(t)
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "claim-uid"}}
	sandbox := func(launch string, applied time.Time) *sandboxv1beta1.Sandbox {
		yes := true
		return &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-abcde", UID: "sb-uid",
			Labels: map[string]string{sandboxv1beta1.LabelLaunchType: launch},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
				Name: "c", UID: "claim-uid", Controller: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "ctrl", Operation: metav1.ManagedFieldsOperationApply,
				Time: &metav1.Time{Time: applied}}}}}
	}
	check := func(name string, c *extv1beta1.SandboxClaim, sb *sandboxv1beta1.Sandbox, want time.Duration) {
		t.Helper()
		var objs []client.Object
		if c != nil {
			objs = append(objs, c)
		}
		cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
		r := &SandboxReconciler{Client: cl, Engine: ssa.New(cl, "ctrl", "ctrl-status"), Templates: true}
		if got := r.awaitClaimCommit(context.Background(), sb, now); got != want {
			t.Errorf("%s: waits %v, want %v", name, got, want)
		}
	}
	warm := sandbox(sandboxv1beta1.LaunchTypeWarm, now.Add(-time.Second))
	check("taken moments ago, the claim waiting", claim, warm, claimCommitPoll)
	check("a cold start", claim, sandbox(sandboxv1beta1.LaunchTypeCold, now), 0)
	check("taken long ago", claim, sandbox(sandboxv1beta1.LaunchTypeWarm, now.Add(-claimCommitWait)), 0)
	check("the claim is gone", nil, warm, 0)
	other := claim.DeepCopy()
	other.UID = "another"
	check("another claim of the name", other, warm, 0)
	bound := claim.DeepCopy()
	bound.Status.Sandbox.Name = "p-abcde"
	check("the claim is bound", bound, warm, 0)
	reported := claim.DeepCopy()
	reported.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ReconcilerError"}}
	check("the claim is reported on", reported, warm, 0)
	// Bound already, while other claims of the pool wait and move with
	// members left to take (a burst): it waits for them too, parked,
	// until they stand still for claimCommitWait, and claimBurstWait after
	// the take at most.
	bound.Spec.WarmPoolRef.Name = "p"
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(bound).Build()
	q := NewWarmQueue()
	q.now = func() time.Time { return now }
	r := &SandboxReconciler{Client: cl, Engine: ssa.New(cl, "ctrl", "ctrl-status"), Templates: true, Claims: q}
	q.ClaimHandler().OnAdd(waitingClaim("other", "p"), false)
	if got := r.awaitClaimCommit(context.Background(), warm, now); got != 0 {
		t.Errorf("claims left with nothing to take: waits %v", got)
	}
	q.Handler().OnAdd(member("m", "p", true), false)
	if got := r.awaitClaimCommit(context.Background(), warm, now); got != claimCommitWait {
		t.Errorf("a burst: waits %v, want %v (until its claims stand still)", got, claimCommitWait)
	}
	if got := r.awaitClaimCommit(context.Background(), warm, now.Add(claimCommitWait)); got != 0 {
		t.Errorf("claims that stood still for claimCommitWait: waits %v", got)
	}
	later := now.Add(claimBurstWait - 2*time.Second) // warm was taken a second before now
	q.now = func() time.Time { return later }
	q.ClaimHandler().OnAdd(waitingClaim("another", "p"), false)
	if got := r.awaitClaimCommit(context.Background(), warm, later); got != time.Second {
		t.Errorf("a burst still moving, claimBurstWait after the take in a second: waits %v, want 1s", got)
	}
	if got := r.awaitClaimCommit(context.Background(), warm, later.Add(time.Second)); got != 0 {
		t.Errorf("claimBurstWait after the take: waits %v", got)
	}
	off := &SandboxReconciler{Templates: false}
	if got := off.awaitClaimCommit(context.Background(), warm, now); got != 0 {
		t.Errorf("without the extension controllers: waits %v", got)
	}
}

// TestAwaitClaimCommitWakes: with the warm queue, a Sandbox a claim took
// waits parked, not polling: the queue wakes it when its claim's commit
// arrives, and when the burst it then waits for ends (the last waiting
// claim stops waiting, or the last member to take leaves). A claim the
// queue has not seen wait yet is polled. A wake reaches only the parked
// Sandbox, once.
func TestAwaitClaimCommitWakes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	scheme := claimScheme(t)
	yes := true
	claim := waitingClaim("c", "p")
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-abcde", UID: "sb-uid",
		Labels: map[string]string{sandboxv1beta1.LabelLaunchType: sandboxv1beta1.LaunchTypeWarm},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
			Name: "c", UID: claim.UID, Controller: &yes}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "ctrl", Operation: metav1.ManagedFieldsOperationApply,
			Time: &metav1.Time{Time: now.Add(-time.Second)}}}}}
	key := types.NamespacedName{Namespace: "ns", Name: "p-abcde"}
	q := NewWarmQueue()
	q.now = func() time.Time { return now }
	var woken []types.NamespacedName
	q.SetWake(func(k types.NamespacedName) { woken = append(woken, k) })
	reconciler := func(c *extv1beta1.SandboxClaim) *SandboxReconciler {
		cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(c).Build()
		return &SandboxReconciler{Client: cl, Engine: ssa.New(cl, "ctrl", "ctrl-status"), Templates: true, Claims: q}
	}
	takeWoken := func() []types.NamespacedName { w := woken; woken = nil; return w }

	// The cache shows the claim waiting before the queue's events do.
	if got := reconciler(claim).awaitClaimCommit(context.Background(), sb, now); got != claimCommitPoll {
		t.Errorf("a claim the queue has not seen: waits %v, want %v", got, claimCommitPoll)
	}
	claims := q.ClaimHandler()
	claims.OnAdd(claim, false)
	other := waitingClaim("other", "p")
	claims.OnAdd(other, false)
	q.Handler().OnAdd(member("m", "p", true), false)
	if got := reconciler(claim).awaitClaimCommit(context.Background(), sb, now); got != claimCommitWait-time.Second {
		t.Errorf("parked on the claim: waits %v, want %v", got, claimCommitWait-time.Second)
	}
	// Another claim moving wakes nothing; this claim's commit wakes sb.
	moved := other.DeepCopy()
	moved.Spec.WarmPoolRef.Name = "elsewhere"
	claims.OnUpdate(other, moved)
	claims.OnUpdate(moved, other)
	if w := takeWoken(); len(w) != 0 {
		t.Fatalf("another claim moved: woke %v", w)
	}
	committed := claim.DeepCopy()
	committed.Status.Sandbox.Name = sb.Name
	committed.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
	claims.OnUpdate(claim, committed)
	if w := takeWoken(); len(w) != 1 || w[0] != key {
		t.Fatalf("the claim's commit woke %v, want [%v]", w, key)
	}
	// Woken, it waits for the burst: the other claim waits, a member is left.
	r := reconciler(committed)
	if got := r.awaitClaimCommit(context.Background(), sb, now); got != claimCommitWait {
		t.Errorf("parked on the burst: waits %v, want %v", got, claimCommitWait)
	}
	claims.OnUpdate(other, other.DeepCopy()) // no move: still waiting
	if w := takeWoken(); len(w) != 0 {
		t.Fatalf("the burst goes on: woke %v", w)
	}
	// The last member leaves: the burst may end (nothing left to take).
	q.Handler().OnDelete(member("m", "p", true))
	if w := takeWoken(); len(w) != 1 || w[0] != key {
		t.Fatalf("the last member left: woke %v, want [%v]", w, key)
	}
	q.Handler().OnAdd(member("m2", "p", true), false)
	if got := r.awaitClaimCommit(context.Background(), sb, now); got != claimCommitWait {
		t.Errorf("parked on the burst again: waits %v, want %v", got, claimCommitWait)
	}
	// The last waiting claim stops waiting: the burst is over.
	claims.OnDelete(other)
	if w := takeWoken(); len(w) != 1 || w[0] != key {
		t.Fatalf("the burst ended: woke %v, want [%v]", w, key)
	}
	if got := r.awaitClaimCommit(context.Background(), sb, now); got != 0 {
		t.Errorf("after the burst: waits %v", got)
	}
	// A parked Sandbox that is deleted is forgotten, never woken.
	claims.OnAdd(other, false)
	if got := r.awaitClaimCommit(context.Background(), sb, now); got != claimCommitWait {
		t.Errorf("a new burst: waits %v, want %v", got, claimCommitWait)
	}
	q.Handler().OnDelete(sb)
	claims.OnDelete(other)
	if w := takeWoken(); len(w) != 0 {
		t.Fatalf("a deleted Sandbox was woken: %v", w)
	}
	if len(q.parked) != 0 {
		t.Errorf("parked after all ended: %v", q.parked)
	}
}
