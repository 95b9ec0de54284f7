package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/tests"
)

// TestNativeRuntimeIsolationMessages installs config/policies/
// runtime-isolation.yaml in the API server (bound to this test's namespace
// only, its params in a namespace of its own) and checks that a sandbox Pod
// without a runtime class is refused with the message saying the cluster
// has no isolating RuntimeClass, one with a class outside the allowlist
// with the allowlist, as the controller's own engine says.
func TestNativeRuntimeIsolationMessages(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	params := env.Namespace(t)
	data, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "policies", policy.BundleRuntimeIsolation+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("runtime-isolation.yaml has %d documents, want a policy, a binding and params", len(docs))
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	cm := &corev1.ConfigMap{}
	for i, into := range []any{vap, binding, cm} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatal(err)
		}
	}
	name := "runtime-isolation-" + ns
	vap.Name, binding.Name, binding.Spec.PolicyName = name, name, name
	cm.Namespace, binding.Spec.ParamRef.Namespace = params, params
	binding.Spec.MatchResources.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	// A class outside the allowlist, which the RuntimeClass admission
	// plugin needs to exist.
	runc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc-" + ns}, Handler: "runc"}
	for _, o := range []client.Object{cm, vap, binding, runc} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("the API server refused %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, vap, runc} {
			_ = env.Client.Delete(context.Background(), o)
		}
	})

	pod := func(name string, class *string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "0badc0de"}},
			Spec: corev1.PodSpec{RuntimeClassName: class, AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}}},
		}
	}
	const unset = "runtimeClassName (unset) is not allowed for sandboxes, and the cluster has no isolating RuntimeClass to default to: install gVisor or Kata with a RuntimeClass named one of: gvisor, kata, kata-qemu, kata-clh, kata-fc"
	// The policy takes effect once the API server has loaded it.
	deadline := time.Now().Add(time.Minute)
	for {
		err := env.Client.Create(ctx, pod("unset", nil))
		if err != nil && strings.Contains(err.Error(), unset) {
			break
		}
		if err == nil {
			_ = env.Client.Delete(ctx, pod("unset", nil))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime-isolation policy never took effect (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	err = env.Client.Create(ctx, pod("runc", ptr.To(runc.Name)))
	if want := "runtimeClassName " + runc.Name + " is not allowed for sandboxes; set spec.podTemplate.spec.runtimeClassName to one of: gvisor, kata, kata-qemu, kata-clh, kata-fc"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a Pod under %s: %v, want %q", runc.Name, err, want)
	}
}
