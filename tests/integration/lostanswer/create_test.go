package lostanswer

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// TestLostCreateAnswerIsReadBack: a claim finds its pool empty and creates
// its own Sandbox; while the create is on its way the pool gets a Ready
// member, the API server makes the create but its answer is lost, and the
// controller's cache shows nothing of it for seconds. The claim must end
// bound to its own Sandbox and must never control a second one: the
// create's outcome is read back before the claim takes the member the
// queue now offers. Before the fix, the claim took the member (found by
// the API server restart fault scenario: two claims controlled a second
// Sandbox).
func TestLostCreateAnswerIsReadBack(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	ctx := t.Context()
	c := env.Client
	env.CreatePool(t, ns, "pool", 0)
	pool := client.ObjectKey{Namespace: ns, Name: "pool"}

	controlled := watchClaimed(t, ns)
	memberReady := false
	faults.armCreate(ns, 3*time.Second, func() {
		// While the claim's create waits: one Ready member, in the
		// controller's cache (the pool reports it).
		// A merge patch, not an update: the controller writes the pool's
		// status meanwhile, and an update of the pool read before that
		// conflicts.
		p := extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
		if err := c.Patch(ctx, &p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
			t.Error(err)
			return
		}
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if err := c.Get(ctx, pool, &p); err == nil && p.Status.ReadyReplicas == 1 {
				memberReady = true
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Cleanup(func() { faults.arm("", 0, 0) })
	got := claimReady(t, ns, "pool")
	lost, reads := faults.result()
	switch {
	case lost == "":
		t.Fatal("no create's answer was lost: the scenario did not happen")
	case !memberReady:
		t.Fatal("the pool had no Ready member while the create waited: the scenario did not happen")
	}
	if reads < 1 {
		t.Errorf("the Sandbox whose create was not answered was read %d times, want one that settled it", reads)
	}
	boundOnlyTo(t, got, lost, "create", controlled)
}
