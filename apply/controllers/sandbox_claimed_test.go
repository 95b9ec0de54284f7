package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// TestAwaitClaimCommit: the reconcile of a warm Sandbox a claim took
// moments ago waits while the claim waits for its commit, and only then:
// not for a cold start, a claim bound or reported on, another claim of
// the same name, or past claimCommitWait.
func TestAwaitClaimCommit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{sandboxv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
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
	// members left to take (a burst): it waits for them too,
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
	if got := r.awaitClaimCommit(context.Background(), warm, now); got != claimCommitPoll {
		t.Errorf("a burst: waits %v, want %v", got, claimCommitPoll)
	}
	if got := r.awaitClaimCommit(context.Background(), warm, now.Add(claimCommitWait)); got != 0 {
		t.Errorf("claims that stood still for claimCommitWait: waits %v", got)
	}
	later := now.Add(claimBurstWait - 2*time.Second) // warm was taken a second before now
	q.now = func() time.Time { return later }
	q.ClaimHandler().OnAdd(waitingClaim("another", "p"), false)
	if got := r.awaitClaimCommit(context.Background(), warm, later); got != claimCommitPoll {
		t.Errorf("a burst still moving: waits %v, want %v", got, claimCommitPoll)
	}
	if got := r.awaitClaimCommit(context.Background(), warm, later.Add(time.Second)); got != 0 {
		t.Errorf("claimBurstWait after the take: waits %v", got)
	}
	off := &SandboxReconciler{Templates: false}
	if got := off.awaitClaimCommit(context.Background(), warm, now); got != 0 {
		t.Errorf("without the extension controllers: waits %v", got)
	}
}
