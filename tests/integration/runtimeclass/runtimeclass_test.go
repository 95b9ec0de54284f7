package runtimeclass

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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

const timeout = 30 * time.Second

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	envtest.Eventually(t, timeout, what, check)
}

func plainSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}}}
}

// plainSandbox is an upstream manifest: no runtime class.
func plainSandbox(ns, name string) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{Spec: plainSpec()}}},
	}
}

func installRuntimeClass(t *testing.T, name string) {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name}
	if err := env.Client.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeRuntimeClass(t, name) })
}

func removeRuntimeClass(t *testing.T, name string) {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Delete(context.Background(), rc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// podClass waits for the Pod of a Sandbox and returns its runtime class.
func podClass(t *testing.T, ns, name string) string {
	t.Helper()
	var class string
	eventually(t, "pod of "+name, func() error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		class = ptr.Deref(pod.Spec.RuntimeClassName, "(unset)")
		return nil
	})
	return class
}

// TestPlainSandboxGetsTheClusterIsolatingClass: on a cluster without an
// isolating RuntimeClass, a plain Sandbox (and a pool of a plain template)
// is refused with a message that says so; once a gvisor RuntimeClass is
// installed their Pods get gvisor, without a change to any of them, while
// the Sandboxes keep naming no class. Later RuntimeClass changes reach new
// Pods only: a running Pod keeps its class and is no drift.
func TestPlainSandboxGetsTheClusterIsolatingClass(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	installRuntimeClass(t, "runc") // not an isolating class

	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: plainSpec()}}}
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	for _, o := range []client.Object{plainSandbox(ns, "early"), tmpl, pool} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const noClass = "the cluster has no isolating RuntimeClass to default to"
	eventually(t, "plain Sandbox refused for want of an isolating class", func() error {
		sb := &sandboxv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "early"}, sb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
		if c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied || !strings.Contains(c.Message, noClass) {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})
	eventually(t, "pool refused for want of an isolating class", func() error {
		p := &extv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, extv1beta1.ConditionReady)
		if c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied || !strings.Contains(c.Message, noClass) {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})

	// gVisor is installed: nothing else changes, and the Pods come.
	installRuntimeClass(t, "gvisor")
	if got := podClass(t, ns, "early"); got != "gvisor" {
		t.Errorf("the plain Sandbox's Pod runs under %s, want gvisor", got)
	}
	var members sandboxv1beta1.SandboxList
	eventually(t, "the pool's member", func() error {
		if err := env.Client.List(ctx, &members, client.InNamespace(ns), client.HasLabels{sandboxv1beta1.LabelWarmPoolSandbox}); err != nil {
			return err
		}
		if len(members.Items) != 1 {
			return fmt.Errorf("%d members", len(members.Items))
		}
		return nil
	})
	member := members.Items[0]
	if got := podClass(t, ns, member.Name); got != "gvisor" {
		t.Errorf("the member's Pod runs under %s, want gvisor", got)
	}
	// What users (and the pool) committed is unchanged: no GitOps drift.
	for _, key := range []types.NamespacedName{{Namespace: ns, Name: "early"}, {Namespace: ns, Name: member.Name}} {
		sb := &sandboxv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, key, sb); err != nil {
			t.Fatal(err)
		}
		if rc := sb.Spec.PodTemplate.Spec.RuntimeClassName; rc != nil {
			t.Errorf("Sandbox %s has runtimeClassName %q written into it", key.Name, *rc)
		}
	}

	// Kata comes, gVisor goes: new Pods get kata, the running one keeps
	// gvisor (runtimeClassName is immutable) and that is not drift.
	installRuntimeClass(t, "kata")
	removeRuntimeClass(t, "gvisor")
	if err := env.Client.Create(ctx, plainSandbox(ns, "later")); err != nil {
		t.Fatal(err)
	}
	if got := podClass(t, ns, "later"); got != "kata" {
		t.Errorf("a Sandbox made after gvisor went runs under %s, want kata", got)
	}
	// Touch the early Sandbox so that it is reconciled under the new default.
	sb := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "early"}, sb); err != nil {
		t.Fatal(err)
	}
	sb.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := podClass(t, ns, "early"); got != "gvisor" {
		t.Errorf("the running Pod now runs under %s, want gvisor still", got)
	}
	var evs eventsv1.EventList
	if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == "PodTemplateDrift" {
			t.Errorf("drift reported for %s: %s", e.Regarding.Name, e.Note)
		}
	}
}
