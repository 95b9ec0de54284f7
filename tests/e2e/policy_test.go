package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests"
)

// TestNativePoliciesEnforce applies config/policies (the built-in bundles
// as plain ValidatingAdmissionPolicies) to the local cluster's API server
// and checks that it accepts them and refuses a sandbox Pod that breaks
// them, with the same message the controller reports.
func TestNativePoliciesEnforce(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dir := filepath.Join(tests.RepoRoot(), "config", "policies")
	var applied []*unstructured.Unstructured
	t.Cleanup(func() { removePolicies(t, c, applied) })
	for _, f := range []string{"runtime-isolation.yaml", "baseline.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
				t.Fatalf("the API server refused %s %s from %s: %v", obj.GetKind(), obj.GetName(), f, err)
			}
			applied = append(applied, obj)
		}
	}

	testNS := namespace(t, c)
	pod := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "0badc0de"}},
			Spec: corev1.PodSpec{
				RuntimeClassName:             ptr.To("gvisor"),
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}},
			},
		}
		mutate(p)
		return p
	}
	// Policies take effect once the API server's policy informer has them.
	var denial error
	waitFor(t, time.Minute, "privileged sandbox Pod refused by the API server", func() error {
		p := pod(fmt.Sprintf("priv-%d", time.Now().UnixNano()%100000), func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})
		err := c.Create(ctx, p)
		if err == nil {
			_ = c.Delete(ctx, p)
			return errors.New("created")
		}
		denial = err
		return nil
	})
	if !strings.Contains(denial.Error(), "privileged containers are not allowed: agent") {
		t.Errorf("denial %q lacks the policy's message", denial)
	}
	err := c.Create(ctx, pod("runc", func(p *corev1.Pod) { p.Spec.RuntimeClassName = nil }))
	if err == nil || !strings.Contains(err.Error(), "runtimeClassName (unset) is not allowed") {
		t.Errorf("a sandbox Pod without a runtime class: %v", err)
	}
	if err := c.Create(ctx, pod("ok", func(*corev1.Pod) {})); err != nil {
		t.Errorf("a compliant sandbox Pod was refused: %v", err)
	}
	// Pods that are not sandboxes are not the policies' business.
	if err := c.Create(ctx, pod("other", func(p *corev1.Pod) { p.Labels = nil; p.Spec.RuntimeClassName = nil })); err != nil {
		t.Errorf("a Pod outside sandboxes was refused: %v", err)
	}
}

// removePolicies deletes what TestNativePoliciesEnforce applied in the
// order it was applied (each policy before its binding, the binding before
// its parameters: a binding left without its parameters denies every
// request it matches), then waits until the API server admits a sandbox Pod
// that the policies refused, so that the tests after it find the cluster as
// it was.
func removePolicies(t *testing.T, c client.Client, applied []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, obj := range applied {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	waitFor(t, time.Minute, "the API server admitting sandbox Pods without a runtime class again", func() error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "after-policies",
				Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "0badc0de"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}}},
		}
		return c.Create(ctx, p, client.DryRunAll) // nothing is made
	})
}
