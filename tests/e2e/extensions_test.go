package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

var (
	e2eTemplate = tests.Template
	e2ePool     = tests.WarmPool
	e2eClaim    = tests.Claim
)

func poolReady(c client.Client, ns, name string, want int32) func() error {
	return func() error {
		p := &extv1beta1.SandboxWarmPool{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		if p.Status.ReadyReplicas != want || p.Status.Replicas != want {
			return fmt.Errorf("pool %s: %d members, %d Ready%s", name, p.Status.Replicas, p.Status.ReadyReplicas, whyNotReady(c, ns))
		}
		return nil
	}
}

// whyNotReady names a Sandbox of ns that is not Ready and its Ready
// condition, for a failure message ("" when there is none).
func whyNotReady(c client.Client, ns string) string {
	var sbs sandboxv1beta1.SandboxList
	if err := c.List(context.Background(), &sbs, client.InNamespace(ns)); err != nil {
		return ""
	}
	for _, sb := range sbs.Items {
		if r := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
			return fmt.Sprintf(" (Sandbox %s: Ready %+v)", sb.Name, r)
		}
	}
	return ""
}

func claimReady(c client.Client, ns, name string) func() error {
	return func() error {
		cl := &extv1beta1.SandboxClaim{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(cl.Status.Conditions, extv1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
			return fmt.Errorf("claim %s Ready is %+v", name, r)
		}
		return nil
	}
}

// makePool creates template "tpl" and pool "pool" of replicas members in
// ns and waits until every member is Ready.
func makePool(t *testing.T, c client.Client, ns string, replicas int32) time.Duration {
	t.Helper()
	for _, o := range []client.Object{e2eTemplate(ns, "tpl"), e2ePool(ns, "pool", "tpl", replicas)} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return waitFor(t, 2*time.Minute, fmt.Sprintf("pool of %d Ready", replicas), poolReady(c, ns, "pool", replicas))
}

// TestClaimsOnLocalCluster runs claims against a real control plane with
// the garbage collector: a warm claim whose pool refills, and the three
// shutdown policies, whose deletions GC carries through to the Pods.
func TestClaimsOnLocalCluster(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	ctx := context.Background()
	took := makePool(t, c, ns, 2)
	t.Logf("pool filled in %s", took.Round(time.Millisecond))

	soon := metav1.NewTime(time.Now().Add(20 * time.Second))
	expiring := func(policy extv1beta1.ShutdownPolicy) func(*extv1beta1.SandboxClaim) {
		return func(cl *extv1beta1.SandboxClaim) {
			cl.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &soon, ShutdownPolicy: policy}
		}
	}
	claims := map[string]extv1beta1.ShutdownPolicy{
		"delete": extv1beta1.ShutdownPolicyDelete, "foreground": extv1beta1.ShutdownPolicyDeleteForeground,
		"retain": extv1beta1.ShutdownPolicyRetain,
	}
	for name, policy := range claims {
		if err := c.Create(ctx, e2eClaim(ns, name, "pool", expiring(policy))); err != nil {
			t.Fatal(err)
		}
	}
	bound := map[string]string{}
	for name := range claims {
		took := waitFor(t, time.Minute, "claim "+name+" Ready", claimReady(c, ns, name))
		cl := &extv1beta1.SandboxClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
			t.Fatal(err)
		}
		bound[name] = cl.Status.Sandbox.Name
		t.Logf("claim %s Ready (%s) on Sandbox %s", name, took.Round(time.Millisecond), cl.Status.Sandbox.Name)
	}
	waitFor(t, 2*time.Minute, "pool refilled", poolReady(c, ns, "pool", 2))

	// After expiry: Delete and DeleteForeground take the claim, its Sandbox
	// and its Pod; Retain keeps the claim and removes Sandbox and Pod.
	for name, policy := range claims {
		sb := types.NamespacedName{Namespace: ns, Name: bound[name]}
		waitFor(t, time.Minute, name+": Sandbox gone", gone(c, sb, &sandboxv1beta1.Sandbox{}))
		waitFor(t, time.Minute, name+": Pod gone", gone(c, sb, &corev1.Pod{}))
		claimKey := types.NamespacedName{Namespace: ns, Name: name}
		if policy == extv1beta1.ShutdownPolicyRetain {
			waitFor(t, time.Minute, "retained claim reports expiry", func() error {
				cl := &extv1beta1.SandboxClaim{}
				if err := c.Get(ctx, claimKey, cl); err != nil {
					return err
				}
				if r := meta.FindStatusCondition(cl.Status.Conditions, extv1beta1.ConditionReady); r == nil || r.Reason != extv1beta1.ReasonClaimExpired {
					return fmt.Errorf("Ready is %+v", r)
				}
				return nil
			})
			continue
		}
		waitFor(t, time.Minute, name+": claim gone", gone(c, claimKey, &extv1beta1.SandboxClaim{}))
	}
	// The pool kept its members through all of it.
	waitFor(t, time.Minute, "pool still full", poolReady(c, ns, "pool", 2))
}
