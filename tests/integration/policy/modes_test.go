package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// TestNamespaceModes: a Sandbox baseline denies is held with PolicyDenied
// under the default (enforce); labelling its namespace baseline=warn lets
// it through without an edit of its own, with a PolicyWarning event; a
// namespace in audit creates silently; restricted, off by default, is
// enforced where a namespace asks for it.
func TestNamespaceModes(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	box := func(name string, mutate ...func(*corev1.PodSpec)) *sandboxv1beta1.Sandbox {
		return &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{Spec: podSpec(mutate...)}}},
		}
	}
	label := func(key, value string) {
		t.Helper()
		nsObj := &corev1.Namespace{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj); err != nil {
			t.Fatal(err)
		}
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels[key] = value
		if err := env.Client.Update(ctx, nsObj); err != nil {
			t.Fatal(err)
		}
	}
	hasPod := func(name string) func() error {
		return func() error {
			return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
		}
	}
	reason := func(name, want string) func() error {
		return func() error {
			if c := ready(t, ns, name); c == nil || c.Reason != want {
				return fmt.Errorf("Ready is %+v, want reason %s", c, want)
			}
			return nil
		}
	}
	events := func(name, reason string) int {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				n++
			}
		}
		return n
	}

	if err := env.Client.Create(ctx, box("root", gvisor, privileged)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "enforced by default", reason("root", sandboxv1beta1.ReasonPolicyDenied))

	label(policy.ModeLabel(policy.BundleBaseline), "warn")
	eventually(t, "the Pod once the namespace warns", hasPod("root"))
	eventually(t, "a PolicyWarning event", func() error {
		if events("root", "PolicyWarning") == 0 {
			return fmt.Errorf("no PolicyWarning event")
		}
		return nil
	})

	label(policy.ModeLabel(policy.BundleBaseline), "audit")
	if err := env.Client.Create(ctx, box("audited", gvisor, privileged)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Pod in audit mode", hasPod("audited"))
	if n := events("audited", "PolicyWarning") + events("audited", "PolicyDenied"); n != 0 {
		t.Errorf("audit mode: %d warning or denial events", n)
	}

	label(policy.ModeLabel(policy.BundleRestricted), "enforce")
	if err := env.Client.Create(ctx, box("loose", gvisor)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restricted enforced by the namespace", reason("loose", sandboxv1beta1.ReasonPolicyDenied))
	if c := ready(t, ns, "loose"); c == nil || !strings.Contains(c.Message, "agent-sandbox-restricted") {
		t.Errorf("denial message %+v", c)
	}
}
