package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// gcPrompt is how soon garbage collection must remove what a deleted
// claim owned. kube-controller-manager's garbage collector learns of new
// resources at its discovery resync, every 30 s: on a cluster that
// installed the CRDs after it started, a claim deleted right after Start
// kept its Sandbox and Pod for anything up to 30 s (8.6 s and 20 s
// measured); restarted after the install, about 0.1 s.
const gcPrompt = 3 * time.Second

// ownedCollectedAtOnce (issue 26 point 6): on a cluster Start has just
// returned, a claim owns a Sandbox which owns a Pod (no controller runs:
// the owner references are written here as the controller writes them);
// the claim deleted, garbage collection removes the Sandbox and the Pod
// within gcPrompt.
func ownedCollectedAtOnce(t *testing.T, lc *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(lc.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := metav1.NamespaceDefault
	claim := e2eClaim(ns, "gc", "gc")
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(ns, "gc", func(sb *sandboxv1beta1.Sandbox) {
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	})
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gc", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	uid := claim.UID
	if err := c.Delete(ctx, claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "gc"}
	took := waitFor(t, time.Minute, "the claim's Sandbox and Pod collected", func() error {
		if err := gone(c, key, &sandboxv1beta1.Sandbox{})(); err != nil {
			return err
		}
		return gone(c, key, &corev1.Pod{})()
	})
	t.Logf("a claim deleted right after the cluster started: its Sandbox and Pod were gone %s later", took.Round(time.Millisecond))
	if took > gcPrompt {
		t.Errorf("a claim deleted right after the cluster started took %s to take its Sandbox and Pod with it, want at most %s", took.Round(time.Second), gcPrompt)
	}
}

// claimCollectedAtOnce (issue 26 point 6) makes a claim on the cluster up
// just started, deletes it as soon as it is Ready, and checks that its
// Sandbox and Pod are gone within gcPrompt; upAt is when up returned.
func claimCollectedAtOnce(t *testing.T, c client.Client, upAt time.Time) {
	t.Helper()
	ctx := context.Background()
	ns := "default"
	for _, o := range []client.Object{e2eTemplate(ns, "gc"), e2ePool(ns, "gc", "gc", 1), e2eClaim(ns, "gc", "gc")} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "claim gc Ready", claimReady(c, ns, "gc"))
	claim := &extv1beta1.SandboxClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gc"}, claim); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: claim.Status.Sandbox.Name}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		t.Fatalf("the claim's Pod: %v", err)
	}
	deleted := time.Now()
	since := deleted.Sub(upAt)
	uid := claim.UID
	if err := c.Delete(ctx, claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Minute, "the claim's Sandbox and Pod collected", func() error {
		if err := gone(c, key, &sandboxv1beta1.Sandbox{})(); err != nil {
			return err
		}
		return gone(c, key, &corev1.Pod{})()
	})
	t.Logf("claim deleted %s after up returned; its Sandbox and Pod were gone %s later", since.Round(time.Millisecond), took.Round(time.Millisecond))
	if took > gcPrompt {
		t.Errorf("a claim deleted %s after up took %s to take its Sandbox and Pod with it, want at most %s", since.Round(time.Second), took.Round(time.Second), gcPrompt)
	}
	if since > 25*time.Second {
		t.Logf("the claim was deleted %s after up: a garbage collector that learnt of the CRDs late would have caught up by now, so this run proves little", since.Round(time.Second))
	}
}
