package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestDeniedPodIsNotAdopted: a Pod that exists before its Sandbox and is
// labeled adoptable is judged by the policies before the Sandbox takes it
// over. A privileged one is refused (Ready=False PolicyDenied with the
// rule's message, one Warning event) and left exactly as it was; a
// compliant one is adopted.
func TestDeniedPodIsNotAdopted(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	adoptable := func(name string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{sandboxv1beta1.LabelAdoptable: sandboxv1beta1.AdoptableValue}},
			Spec:       podSpec(mutate...),
		}
	}
	sandbox := func(name string) *sandboxv1beta1.Sandbox {
		return &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{Spec: podSpec(gvisor)}}},
		}
	}

	// The Sandbox's own spec is compliant; the Pod waiting for it is not.
	bad := adoptable("forged", gvisor, privileged)
	if err := env.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, sandbox("forged")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PolicyDenied for the existing Pod", func() error {
		c := ready(t, ns, "forged")
		if c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied {
			return fmt.Errorf("Ready is %+v", c)
		}
		if !strings.Contains(c.Message, "privileged containers are not allowed: agent") || !strings.Contains(c.Message, "Pod "+ns+"/forged") ||
			!strings.Contains(c.Message, "not adopted") {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	// Give the controller time to do anything else it would do.
	time.Sleep(time.Second)
	live := &corev1.Pod{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "forged"}, live); err != nil {
		t.Fatalf("the denied Pod is gone (%v): it must be left alone", err)
	}
	if live.UID != bad.UID || live.ResourceVersion != bad.ResourceVersion || len(live.OwnerReferences) > 0 {
		t.Errorf("the denied Pod was changed: owners %+v, resourceVersion %s -> %s", live.OwnerReferences, bad.ResourceVersion, live.ResourceVersion)
	}
	var evs eventsv1.EventList
	if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == sandboxv1beta1.ReasonPolicyDenied && e.Regarding.Name == "forged" && e.Type == corev1.EventTypeWarning {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d PolicyDenied Warning events, want 1", n)
	}

	// Control: a compliant adoptable Pod is adopted under the same policies.
	good := adoptable("fine", gvisor)
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	sb := sandbox("fine")
	if err := env.Client.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "compliant Pod adopted", func() error {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fine"}, p); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != sb.UID || p.UID != good.UID {
			return fmt.Errorf("controller %+v, uid %s", ref, p.UID)
		}
		return nil
	})

	// The user deletes the refused Pod: the Sandbox makes its own.
	if err := env.Client.Delete(ctx, live); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, "the Sandbox's own Pod", func() error {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "forged"}, p); err != nil {
			return err
		}
		if metav1.GetControllerOf(p) == nil {
			return fmt.Errorf("pod %s has no controller yet", p.UID)
		}
		return nil
	})
}
