package lostanswer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestLostTakeAnswerIsReadBack: a claim takes a warm member, the API server
// makes the take but its answer is lost, the first read of the member
// fails too, and the controller's cache shows nothing for seconds. The
// claim must end bound to that member and must never control a second
// Sandbox (a warm one or one of its own): the take's outcome is read back
// before the claim takes anything else. Before the fix, the claim took
// another member and the extra one was deleted later.
func TestLostTakeAnswerIsReadBack(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	ctx := t.Context()
	c := env.Client
	env.CreatePool(t, ns, "pool", 3)
	envtest.Eventually(t, time.Minute, "3 Ready members", func() error {
		var p extv1beta1.SandboxWarmPool
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, &p); err != nil {
			return err
		}
		if p.Status.ReadyReplicas != 3 {
			return fmt.Errorf("%d Ready", p.Status.ReadyReplicas)
		}
		return nil
	})

	controlled := watchClaimed(t, ns)
	faults.arm(ns, 1, 3*time.Second)
	t.Cleanup(func() { faults.arm("", 0, 0) })
	got := claimReady(t, ns, "pool")
	lost, reads := faults.result()
	if lost == "" {
		t.Fatal("no take's answer was lost: the scenario did not happen")
	}
	if reads < 2 {
		t.Errorf("the member whose take was not answered was read %d times, want a failed read and one that settled it", reads)
	}
	boundOnlyTo(t, got, lost, "take", controlled)
}

// boundOnlyTo checks that claim got is bound to lost, the Sandbox whose
// write (what: "take", "create") lost its answer, and that it never
// controlled another (controlled: watchClaimed's record).
func boundOnlyTo(t *testing.T, got extv1beta1.SandboxClaim, lost, what string, controlled func(types.UID) []string) {
	t.Helper()
	if got.Status.Sandbox.Name != lost {
		t.Errorf("claim bound to %q; its %s of %q was made", got.Status.Sandbox.Name, what, lost)
	}
	// Let any second take or cold start show up before counting.
	time.Sleep(2 * time.Second)
	if n := controlled(got.UID); len(n) != 1 {
		t.Errorf("the claim controlled %d Sandboxes over time: %v; want only %s", len(n), n, lost)
	}
}

// claimReady creates the claim "claim" of pool in ns and returns it once
// Ready.
func claimReady(t *testing.T, ns, pool string) extv1beta1.SandboxClaim {
	t.Helper()
	ctx, c := t.Context(), env.Client
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool}}}
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	var got extv1beta1.SandboxClaim
	envtest.Eventually(t, time.Minute, "the claim Ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), &got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == extv1beta1.ConditionReady && cond.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", got.Status.Conditions)
	})
	return got
}

// watchClaimed records, from its own watch (not the controller's), every
// Sandbox each claim ever controlled in ns.
func watchClaimed(t *testing.T, ns string) func(types.UID) []string {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &sandboxv1beta1.SandboxList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[types.UID]map[string]bool{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*sandboxv1beta1.Sandbox)
			if !ok || ev.Type == watch.Error {
				continue
			}
			if ref := metav1.GetControllerOf(sb); ref != nil && sandboxv1beta1.RefersTo(*ref, extv1beta1.ClaimKind) {
				mu.Lock()
				if seen[ref.UID] == nil {
					seen[ref.UID] = map[string]bool{}
				}
				seen[ref.UID][sb.Name] = true
				mu.Unlock()
			}
		}
	}()
	return func(claim types.UID) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for n := range seen[claim] {
			out = append(out, n)
		}
		return out
	}
}
