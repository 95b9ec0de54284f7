package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// shrink is one way a pool gives up members while claims arrive.
type shrink struct {
	name string
	// replicas the pool ends with.
	replicas int32
	// apply changes the pool (or its template) in namespace ns.
	apply func(ctx context.Context, c client.Client, ns string) error
}

func scalePool(replicas int32) func(context.Context, client.Client, string) error {
	return func(ctx context.Context, c client.Client, ns string) error {
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
		return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
	}
}

func editImage(ctx context.Context, c client.Client, ns string) error {
	t := &extv1beta1.SandboxTemplate{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tmpl"}, t); err != nil {
		return err
	}
	t.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.14-slim"
	return c.Update(ctx, t)
}

// scaleSubresource scales the pool as an HPA does: through /scale.
func scaleSubresource(replicas int32) func(context.Context, client.Client, string) error {
	return func(ctx context.Context, c client.Client, ns string) error {
		p := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
		scale := &autoscalingv1.Scale{}
		if err := c.SubResource("scale").Get(ctx, p, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		return c.SubResource("scale").Update(ctx, p, client.WithSubResourceBody(scale))
	}
}

// TestClaimsDuringPoolShrink: a warm pool of 30 under Recreate gives up
// members (scaled to 0 while its template's image changes; a Recreate
// rollout alone; an HPA-style scale down through the scale subresource)
// at the very moment 30 claims arrive, three times each. Every claim must
// end bound to a Sandbox it controls, and no claim may lose the Sandbox it
// was bound to: the pool never deletes a member a claim has taken.
func TestClaimsDuringPoolShrink(t *testing.T) {
	c := newClient(t)
	ctrl := startController(t, "shrink", "--leader-elect=false")
	const poolSize, claims, rounds = 30, 30, 3
	shrinks := []shrink{
		{name: "scale-to-0-and-image", replicas: 0, apply: func(ctx context.Context, c client.Client, ns string) error {
			if err := scalePool(0)(ctx, c, ns); err != nil {
				return err
			}
			return editImage(ctx, c, ns)
		}},
		{name: "recreate", replicas: poolSize, apply: editImage},
		{name: "hpa-scale-down", replicas: 5, apply: scaleSubresource(5)},
	}
	total := map[string]int{}
	for round := range rounds {
		for _, s := range shrinks {
			ns := namespace(t, c, fmt.Sprintf("shrink-%s-%d", s.name, round))
			rec := record(t, ns)
			p := pool(ns, "pool", "tmpl", poolSize)
			p.Spec.UpdateStrategy = &extv1beta1.UpdateStrategy{Type: extv1beta1.UpdateStrategyRecreate}
			if err := send(c, []client.Object{template(ns, "tmpl"), p}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Minute, "pool "+ns+" full", converged(c, ns))

			objs := make([]client.Object, claims)
			for i := range objs {
				objs[i] = claim(ns, fmt.Sprintf("claim-%02d", i), "pool")
			}
			start := time.Now()
			sent := make(chan error, 1)
			go func() { sent <- send(c, objs) }()
			if err := s.apply(context.Background(), c, ns); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Minute, ns+" converges", converged(c, ns))
			// Members deleted by the pool leave Pods for the garbage
			// collector: let it finish and the pool see its latest spec.
			waitFor(t, 2*time.Minute, ns+" settles", settled(c, ns))
			inv := check(t, c, ns, rec)
			warm, cold, missing := launches(t, c, ns)
			total["claims"] += claims
			total["warm"] += warm
			total["cold"] += cold
			total["lost"] += inv.BoundClaimsLostSandbox
			total["missing"] += missing
			report(t, map[string]any{"run": s.name, "round": round, "seconds": time.Since(start).Seconds(),
				"claimsBound": warm + cold, "warm": warm, "cold": cold, "sandboxMissing": missing,
				"boundClaimsLostSandbox": inv.BoundClaimsLostSandbox, "invariants": inv})
			if inv.violations() > 0 || missing > 0 {
				t.Errorf("%s round %d: invariants violated (%d claims SandboxMissing): %+v", s.name, round, missing, inv)
			}
			if err := c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Logf("deleting %s: %v", ns, err)
			}
		}
	}
	errs, examples := errorLines(t, ctrl.LogPath)
	report(t, map[string]any{"run": "total", "figures": total, "errorLines": errs, "examples": examples})
	if errs > 0 {
		t.Errorf("the controller logged %d error lines, e.g. %q", errs, examples)
	}
}

// launches counts the namespace's claims by how their Sandbox came (warm or
// cold, from the Sandbox's launch-type label) and those reporting their
// Sandbox missing.
func launches(t *testing.T, c client.Client, ns string) (warm, cold, missing int) {
	t.Helper()
	ctx := context.Background()
	var claims extv1beta1.SandboxClaimList
	if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if r := meta.FindStatusCondition(cl.Status.Conditions, extv1beta1.ConditionReady); r != nil && r.Reason == extv1beta1.ReasonSandboxMissing {
			missing++
		}
		sb := &sandboxv1beta1.Sandbox{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: cl.Status.Sandbox.Name}, sb); err != nil {
			continue
		}
		if sb.Labels[sandboxv1beta1.LabelLaunchType] == sandboxv1beta1.LaunchTypeWarm {
			warm++
		} else {
			cold++
		}
	}
	return warm, cold, missing
}

// settled reports nil once the pool has reported on its latest spec,
// replaced every member of an older template, and every Pod's Sandbox
// exists (the garbage collector removed the Pods of
// deleted members).
func settled(c client.Client, ns string) func() error {
	return func() error {
		ctx := context.Background()
		p := &extv1beta1.SandboxWarmPool{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pool"}, p); err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("pool status at generation %d of %d", p.Status.ObservedGeneration, p.Generation)
		}
		tmpl := &extv1beta1.SandboxTemplate{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tmpl"}, tmpl); err != nil {
			return err
		}
		image := tmpl.Spec.PodTemplate.Spec.Containers[0].Image
		var sbs sandboxv1beta1.SandboxList
		var pods corev1.PodList
		if err := c.List(ctx, &sbs, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		live := map[types.UID]bool{}
		stale := 0
		for _, sb := range sbs.Items {
			live[sb.UID] = true
			// Under Recreate the pool replaces every member of an older
			// template (the status counts them until it does).
			if ref := metav1.GetControllerOf(&sb); ref != nil && ref.UID == p.UID && sb.Spec.PodTemplate.Spec.Containers[0].Image != image {
				stale++
			}
		}
		if stale > 0 {
			return fmt.Errorf("%d members of an older template remain", stale)
		}
		orphans := 0
		for i := range pods.Items {
			if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && !live[ref.UID] {
				orphans++
			}
		}
		if orphans > 0 {
			return fmt.Errorf("%d Pods of deleted Sandboxes remain", orphans)
		}
		// Replacements made meanwhile are Ready too.
		return converged(c, ns)()
	}
}
