package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

// otherManager stands in for a GitOps tool or an HPA.
const otherManager = "gitops-tool"

// applyAs server-side applies a partial object as otherManager once the
// object exists (applying first would create it).
func applyAs(c client.Client, obj *unstructured.Unstructured) error {
	deadline := time.Now().Add(time.Minute)
	for {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got)
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		// Forced, as GitOps tools apply: the fields become the other
		// writer's even where the creator set them first.
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(otherManager), client.ForceOwnership)
		if err == nil || time.Now().After(deadline) || !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func partial(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		obj.Object[k] = v
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// TestOtherWriters: while the controller brings up 100 Sandboxes and a
// pool, another field manager labels and annotates Sandboxes, their Pods
// and Services, suspends ten Sandboxes through operatingMode and scales the
// pool through the scale subresource. Afterwards the other writer's fields
// are all still there, and over a quiet minute the controller writes
// nothing at all: no ping-pong.
func TestOtherWriters(t *testing.T) {
	c := newClient(t)
	ctrl := startController(t, "ctrl", "--leader-elect=false")
	ns := namespace(t, c, "writers")
	objs := burst{ns: ns, sandboxes: 100, claims: 10, pool: 10}.objects(t, c)
	start := time.Now()
	sent := make(chan error, 1)
	go func() { sent <- send(c, objs) }()

	name := func(i int) string { return fmt.Sprintf("sb-%04d", i) }
	edits := []func(i int) error{
		// Labels and annotations on Sandboxes 0-49.
		func(i int) error {
			return applyAs(c, partial("agents.x-k8s.io/v1beta1", "Sandbox", ns, name(i), map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"team": "blue"}, "annotations": map[string]any{"gitops/revision": "r1"}},
			}))
		},
		// Sandboxes 50-59 suspended by the other writer.
		func(i int) error {
			return applyAs(c, partial("agents.x-k8s.io/v1beta1", "Sandbox", ns, name(50+i), map[string]any{
				"spec": map[string]any{"operatingMode": "Suspended"},
			}))
		},
		// A label on the Pods and an annotation on the Services of 0-19.
		func(i int) error {
			if err := applyAs(c, partial("v1", "Pod", ns, name(i), map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"gitops/scanned": "yes"}},
			})); err != nil {
				return err
			}
			return applyAs(c, partial("v1", "Service", ns, name(i), map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{"gitops/exposed": "no"}},
			}))
		},
	}
	counts := []int{50, 10, 20}
	for k, edit := range edits {
		if err := parallelErr(8, counts[k], edit); err != nil {
			t.Fatal(err)
		}
	}
	// The HPA stand-in scales the pool.
	p := &extv1beta1.SandboxWarmPool{}
	p.Namespace, p.Name = ns, "pool"
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}, Spec: autoscalingv1.ScaleSpec{Replicas: 15}}
	if err := c.SubResource("scale").Update(context.Background(), p, client.WithSubResourceBody(scale), client.FieldOwner(otherManager)); err != nil {
		t.Fatalf("scaling the pool: %v", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Minute, "converged with the other writer's edits", func() error {
		if err := converged(c, ns)(); err != nil {
			return err
		}
		return podsMatchModes(c, ns)
	})
	took := time.Since(start)

	// A quiet minute: nothing changes, so the controller must not write.
	time.Sleep(5 * time.Second) // status coalescing and claim annotations settle
	before, err := scrape(ctrl.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
	after, err := scrape(ctrl.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	quietWrites := writes(after) - writes(before)
	changed := tests.MetricChanges(before, after, "rest_client_requests_total{", "agent_sandbox_apply_total{")

	// The other writer's fields are all still there.
	lost := 0
	for i := range 60 {
		sb := &sandboxv1beta1.Sandbox{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name(i)}, sb); err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 50 && (sb.Labels["team"] != "blue" || sb.Annotations["gitops/revision"] != "r1"):
			lost++
			t.Logf("Sandbox %s lost the other writer's metadata: %v %v", sb.Name, sb.Labels, sb.Annotations)
		case i >= 50 && sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended:
			lost++
			t.Logf("Sandbox %s is %s, the other writer suspended it", sb.Name, sb.Spec.OperatingMode)
		}
		if !managedBy(sb.ManagedFields, otherManager) {
			lost++
			t.Logf("Sandbox %s: %s no longer manages any field", sb.Name, otherManager)
		}
	}
	for i := range 20 {
		pod := &corev1.Pod{}
		svc := &corev1.Service{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name(i)}, pod); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name(i)}, svc); err != nil {
			t.Fatal(err)
		}
		if pod.Labels["gitops/scanned"] != "yes" || svc.Annotations["gitops/exposed"] != "no" {
			lost++
			t.Logf("%s: Pod labels %v, Service annotations %v", name(i), pod.Labels, svc.Annotations)
		}
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if *p.Spec.Replicas != 15 {
		lost++
		t.Logf("pool replicas %d, the other writer scaled it to 15", *p.Spec.Replicas)
	}
	inv := check(t, c, ns, nil)
	errs, examples := errorLines(t, ctrl.LogPath)
	report(t, map[string]any{"convergeSeconds": took.Seconds(), "quietMinuteWrites": quietWrites, "quietMinuteChanged": changed,
		"otherWriterFieldsLost": lost, "invariants": inv, "errorLines": errs, "examples": examples})
	if quietWrites != 0 {
		t.Errorf("the controller wrote %v times during a quiet minute: %v", quietWrites, changed)
	}
	if lost > 0 {
		t.Errorf("%d of the other writer's edits were lost", lost)
	}
	if inv.violations() > 0 {
		t.Errorf("invariants violated: %+v", inv)
	}
	if errs > 0 {
		t.Errorf("%d error lines, e.g. %q", errs, examples)
	}
}

func managedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager {
			return true
		}
	}
	return false
}
