package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestPlainSandboxRunsIsolated: the controller binary with its default
// flags (--default-runtime-class=auto) on a cluster with the gvisor and
// kata RuntimeClasses runs an upstream Sandbox that names no runtime class
// under gvisor, and leaves the Sandbox as written.
func TestPlainSandboxRunsIsolated(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	ctx := context.Background()
	sb := sandbox(ns, "plain", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.RuntimeClassName = nil })
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "plain"}
	waitFor(t, time.Minute, "plain Sandbox Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	if rc := pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
		t.Errorf("the Pod's runtimeClassName is %v, want gvisor", rc)
	}
	if err := c.Get(ctx, key, sb); err != nil {
		t.Fatal(err)
	}
	if rc := sb.Spec.PodTemplate.Spec.RuntimeClassName; rc != nil {
		t.Errorf("runtimeClassName %q was written into the Sandbox", *rc)
	}
}
