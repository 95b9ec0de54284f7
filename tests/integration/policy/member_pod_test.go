package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// TestMemberJudgedByItsRunningPod: a warm member whose running Pod breaks
// a policy that was not enforced when the Pod was made (here: baseline off
// in the namespace, and the Pod carries a key Kata reads, which its
// member's spec does not have) is not handed out once enforcement is
// switched on: a claim passes it over with a WarmMemberPolicyDenied event,
// the member is deleted, the pool replaces it, and the claim gets a
// compliant Sandbox.
func TestMemberJudgedByItsRunningPod(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	env.StartKubelet(t, ns)
	setNamespaceLabel(t, ns, policy.ModeLabel(policy.BundleBaseline), "off")
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"},
		Spec:       extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: podSpec(gvisor)}},
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	for _, o := range []client.Object{tmpl, pool} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var tainted sandboxv1beta1.Sandbox
	eventually(t, "a Ready member", func() error {
		var list sandboxv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			if c := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
				tainted = sb
				return nil
			}
		}
		return fmt.Errorf("%d members, none Ready", len(list.Items))
	})
	// What runs is not what the member's spec renders (as after a
	// mutating webhook, or a Pod made under older rules).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&tainted), pod); err != nil {
			return err
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["io.katacontainers.config.hypervisor.kernel_params"] = "init=/bin/sh"
		return env.Client.Update(ctx, pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	setNamespaceLabel(t, ns, policy.ModeLabel(policy.BundleBaseline), "enforce")

	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim is bound to a compliant Sandbox", func() error {
		c := &extv1beta1.SandboxClaim{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), c); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready is %+v", r)
		}
		return nil
	})
	var list sandboxv1beta1.SandboxList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Items {
		if sb.UID == tainted.UID {
			if ref := metav1.GetControllerOf(&sb); ref != nil && ref.Kind == "SandboxClaim" {
				t.Fatalf("the member whose Pod is denied was handed to the claim")
			}
			if sb.DeletionTimestamp == nil {
				t.Errorf("the member whose Pod is denied is still a member")
			}
		}
	}
	eventually(t, "a WarmMemberPolicyDenied event on the claim", func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == sandboxv1beta1.EventWarmMemberPolicyDenied && e.Regarding.Name == "claim" &&
				strings.Contains(e.Note, tainted.Name) && strings.Contains(e.Note, "io.katacontainers.config.hypervisor.kernel_params") {
				return nil
			}
		}
		return fmt.Errorf("no such event among %d", len(evs.Items))
	})
	eventually(t, "the pool replaced its member", func() error {
		var list sandboxv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		members := 0
		for _, sb := range list.Items {
			if ref := metav1.GetControllerOf(&sb); ref != nil && ref.UID == pool.UID && sb.UID != tainted.UID {
				members++
			}
		}
		if members != 1 {
			return fmt.Errorf("%d new members", members)
		}
		return nil
	})
}

func setNamespaceLabel(t *testing.T, ns, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Namespace{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[key] = value
		return env.Client.Update(context.Background(), n)
	})
	if err != nil {
		t.Fatal(err)
	}
}
