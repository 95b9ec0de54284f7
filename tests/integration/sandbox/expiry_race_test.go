package sandbox

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// staleSandboxClient reads one Sandbox as it was (a cache that has not yet
// seen the latest update); everything else, and every write, goes to the
// API server.
type staleSandboxClient struct {
	client.Client
	stale *sandboxv1beta1.Sandbox
}

func (c staleSandboxClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if sb, ok := obj.(*sandboxv1beta1.Sandbox); ok && key == client.ObjectKeyFromObject(c.stale) {
		c.stale.DeepCopyInto(sb)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestExtendedShutdownTimeWinsOverAStaleExpiry: a reconciler that judges a
// Sandbox expired (shutdownPolicy Delete) on a version read before its
// shutdownTime was extended must not delete it: the delete carries the
// resourceVersion it judged as well as the UID, the API server refuses it,
// and the Sandbox lives on to its new shutdownTime.
func TestExtendedShutdownTimeWinsOverAStaleExpiry(t *testing.T) {
	ns := env.Namespace(t)
	at := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	stale := create(t, newSandbox(ns, "extended", func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.ShutdownTime = &at
		sb.Spec.ShutdownPolicy = ptr.To(sandboxv1beta1.ShutdownPolicyDelete)
	}))
	var pod *corev1.Pod
	eventually(t, "the Sandbox's Pod", func() error {
		var err error
		pod, err = get(t, ns, "extended", &corev1.Pod{})
		return err
	})
	stale, err := get(t, ns, "extended", stale)
	if err != nil {
		t.Fatal(err)
	}
	stale = stale.DeepCopy()
	later := metav1.NewTime(at.Add(2 * time.Hour))
	update(t, ns, "extended", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.ShutdownTime = &later })

	// Its clock is past the old shutdownTime, before the new one.
	c := staleSandboxClient{Client: reconciler.Client, stale: stale} // the manager's cache, for its indexes
	r := &controllers.SandboxReconciler{
		Client: c, Engine: ssa.New(c, manager.FieldManager, manager.StatusManager),
		Recorder: events.NewFakeRecorder(100), ClusterDomain: "cluster.local",
		Clock: clocktesting.NewFakePassiveClock(at.Add(time.Hour)), StatusCoalesceWindow: -1,
	}
	_, err = r.Reconcile(ctxFor(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(stale)})
	t.Logf("reconcile on the stale Sandbox: %v", err) // a conflict, retried on a fresh read
	sb, err := get(t, ns, "extended", &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatalf("the Sandbox whose shutdownTime was extended is gone: %v", err)
	}
	if sb.DeletionTimestamp != nil {
		t.Fatalf("the Sandbox whose shutdownTime was extended is being deleted")
	}
	if !sb.Spec.ShutdownTime.Equal(&later) {
		t.Errorf("shutdownTime %v, want %v", sb.Spec.ShutdownTime, later)
	}
	// Nothing else was done on the stale judgment: the Pod, and what runs
	// in it, is the one it had.
	if now, err := get(t, ns, "extended", &corev1.Pod{}); err != nil || now.UID != pod.UID || now.DeletionTimestamp != nil {
		t.Errorf("the Sandbox's Pod was deleted on the stale expiry (err %v)", err)
	}
}
