package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests/envtest"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

const timeout = 30 * time.Second

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	envtest.Eventually(t, timeout, what, check)
}

func podSpec(mutate ...func(*corev1.PodSpec)) corev1.PodSpec {
	s := corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func gvisor(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("gvisor") }

func privileged(s *corev1.PodSpec) {
	s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
}

func ready(t *testing.T, ns, name string) *metav1.Condition {
	t.Helper()
	sb := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
		return nil
	}
	return meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
}

func TestDeniedSandboxCreatesNothingUntilFixed(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "box"},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
			Spec: podSpec(func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("runc") })}}},
	}
	if err := env.Client.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PolicyDenied", func() error {
		c := ready(t, ns, "box")
		if c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied {
			return fmt.Errorf("Ready is %+v", c)
		}
		if !strings.Contains(c.Message, "runtimeClassName runc is not allowed") || !strings.Contains(c.Message, "Pod "+ns+"/box") {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "box"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a denied Sandbox got a Pod (%v)", err)
	}
	// One Warning event, however often the Sandbox is looked at.
	time.Sleep(time.Second)
	var evs eventsv1.EventList
	if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "PolicyDenied" && e.Regarding.Name == "box" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d PolicyDenied events, want 1", n)
	}

	// Making it privileged as well is still denied, with the new reason.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		sb.Spec.PodTemplate.Spec = podSpec(gvisor, privileged)
		return env.Client.Update(ctx, sb)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "denied for privilege", func() error {
		if c := ready(t, ns, "box"); c == nil || !strings.Contains(c.Message, "privileged containers are not allowed: agent") {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})

	// Fixed: the Pod is created.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		sb.Spec.PodTemplate.Spec = podSpec(gvisor)
		return env.Client.Update(ctx, sb)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod created once allowed", func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "box"}, &corev1.Pod{})
	})
}

func TestPolicyChangeLetsDeniedSandboxThrough(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kata-fc-like"},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
			Spec: podSpec(func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("firecracker") })}}},
	}
	if err := env.Client.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PolicyDenied", func() error {
		if c := ready(t, ns, sb.Name); c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})
	// The platform team allows firecracker: a new set with the param changed.
	src, _ := policy.Bundle(policy.BundleRuntimeIsolation)
	base, _ := policy.Bundle(policy.BundleBaseline)
	widened := strings.Replace(string(src.Data), "kata-fc", "kata-fc,firecracker", 1)
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "firecracker"}, Handler: "firecracker"}
	if err := env.Client.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	set, err := policy.Load(policy.Source{Name: "widened", Data: []byte(widened)}, base)
	if err != nil {
		t.Fatal(err)
	}
	old := policies.Get()
	policies.Set(set)
	t.Cleanup(func() { policies.Set(old) })
	// Policy changes are not watched events: the Sandbox is looked at again
	// when anything about it changes; touch it.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		if sb.Labels == nil {
			sb.Labels = map[string]string{}
		}
		sb.Labels["retry"] = "1"
		return env.Client.Update(ctx, sb)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod created under the widened policy", func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sb.Name}, &corev1.Pod{})
	})
}

func TestDeniedTemplateStopsPoolAndColdClaims(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"},
		Spec:       extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: podSpec(privileged)}},
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	for _, o := range []client.Object{tmpl, pool, claim} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "pool says it creates nothing", func() error {
		p := &extv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, extv1beta1.ConditionReady)
		if c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied || !strings.Contains(c.Message, "privileged") {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})
	eventually(t, "cold claim denied", func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), c); err != nil {
			return err
		}
		r := meta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady)
		if r == nil || r.Reason != extv1beta1.ReasonPolicyDenied {
			return fmt.Errorf("Ready is %+v", r)
		}
		return nil
	})
	var list sandboxv1beta1.SandboxList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d Sandboxes made from a denied template", len(list.Items))
	}

	// The template is fixed (no privilege; no runtime class either: the
	// Pods get the controller's default gVisor).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
			return err
		}
		tmpl.Spec.PodTemplate.Spec = podSpec()
		return env.Client.Update(ctx, tmpl)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "pool creates members, claim gets a Sandbox", func() error {
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) < 2 {
			return fmt.Errorf("%d Sandboxes", len(list.Items))
		}
		for _, sb := range list.Items {
			// The Sandboxes mirror the template; their Pods get the default.
			if rc := sb.Spec.PodTemplate.Spec.RuntimeClassName; rc != nil {
				return fmt.Errorf("%s has runtime class %q written into it, want none like its template", sb.Name, *rc)
			}
			pod := &corev1.Pod{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sb.Name}, pod); err != nil {
				return fmt.Errorf("pod of %s: %w", sb.Name, err)
			}
			if rc := pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
				return fmt.Errorf("pod %s has runtime class %v, want the default gvisor", pod.Name, rc)
			}
		}
		return nil
	})
}
