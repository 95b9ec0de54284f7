package integration

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// TestV1alpha1ThroughConversion serves the conversion webhook as the
// controller does and drives the real API server: a v1alpha1 Sandbox is
// stored as v1beta1 (replicas -> operatingMode), reads back unchanged in
// v1alpha1, scales through the v1alpha1 scale subresource, and replicas 2
// is refused with a message that says why.
func TestV1alpha1ThroughConversion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := tests.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	off, err := cluster.InstallLocalConversion(ctx, env.Client, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := off(); err != nil {
			t.Errorf("turning conversion off: %v", err)
		}
	})
	cm := &certs.Certs{Client: env.Client, Namespace: "agent-sandbox-system", CertDir: t.TempDir()}
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{Port: port, Host: "127.0.0.1", CertDir: cm.CertDir})
	srv.Register(webhooks.ConvertPath, webhooks.Converter{})
	go func() { _ = srv.Start(ctx) }()
	for srv.StartedChecker()(&http.Request{}) != nil {
		time.Sleep(20 * time.Millisecond)
	}

	ns := env.Namespace(t)
	manifest := `apiVersion: agents.x-k8s.io/v1alpha1
kind: Sandbox
metadata:
  name: legacy
  namespace: ` + ns + `
spec:
  replicas: 0
  service: true
  podTemplate:
    metadata:
      labels: {app: legacy}
    spec:
      containers:
      - name: agent
        image: python:3.13-slim
`
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	// The API server needs a moment to pick up the CRD's new conversion.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := env.Client.Create(ctx, obj.DeepCopy())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a v1alpha1 Sandbox: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	key := types.NamespacedName{Namespace: ns, Name: "legacy"}

	beta := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, key, beta); err != nil {
		t.Fatal(err)
	}
	if beta.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended || beta.Spec.PodTemplate.ObjectMeta.Labels["app"] != "legacy" {
		t.Errorf("read as v1beta1: operatingMode %q, labels %v", beta.Spec.OperatingMode, beta.Spec.PodTemplate.ObjectMeta.Labels)
	}
	alpha := &sandboxv1alpha1.Sandbox{}
	if err := env.Client.Get(ctx, key, alpha); err != nil {
		t.Fatal(err)
	}
	if alpha.Spec.Replicas == nil || *alpha.Spec.Replicas != 0 || alpha.Spec.Service == nil || !*alpha.Spec.Service {
		t.Errorf("read back as v1alpha1: %+v", alpha.Spec)
	}

	// kubectl scale on the v1alpha1 scale subresource resumes it.
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))
	if err := env.Client.SubResource("scale").Patch(ctx, &sandboxv1alpha1.Sandbox{ObjectMeta: alpha.ObjectMeta}, scale); err != nil {
		t.Fatalf("scaling the v1alpha1 Sandbox: %v", err)
	}
	if err := env.Client.Get(ctx, key, beta); err != nil {
		t.Fatal(err)
	}
	if beta.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeRunning {
		t.Errorf("after scaling to 1: operatingMode %q, want Running", beta.Spec.OperatingMode)
	}

	// The extension kinds: a v1alpha1 claim maps to its shadow pool and
	// reads back unchanged; a v1beta1-only template field survives a read
	// in v1alpha1.
	claim := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxClaim
metadata: {name: legacy-claim, namespace: `+ns+`}
spec:
  sandboxTemplateRef: {name: python}
  warmpool: default
`), &claim.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatalf("creating a v1alpha1 claim: %v", err)
	}
	hubClaim := &extv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "legacy-claim"}, hubClaim); err != nil {
		t.Fatal(err)
	}
	if hubClaim.Spec.WarmPoolRef.Name != "shadow-pool-python" {
		t.Errorf("v1alpha1 claim maps to pool %q, want shadow-pool-python", hubClaim.Spec.WarmPoolRef.Name)
	}
	alphaClaim := &extv1alpha1.SandboxClaim{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "legacy-claim"}, alphaClaim); err != nil {
		t.Fatal(err)
	}
	if alphaClaim.Spec.WarmPool != "default" || alphaClaim.Spec.SandboxTemplateRef == nil || alphaClaim.Spec.SandboxTemplateRef.Name != "python" ||
		len(alphaClaim.Annotations) != 0 {
		t.Errorf("v1alpha1 claim read back: %+v, annotations %v", alphaClaim.Spec, alphaClaim.Annotations)
	}
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python"}}
	tmpl.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}}
	tmpl.Spec.VolumeClaimTemplatesPolicy = extv1beta1.InjectionPolicyOverrides
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	alphaTmpl := &extv1alpha1.SandboxTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), alphaTmpl); err != nil {
		t.Fatal(err)
	}
	if alphaTmpl.Annotations[extv1alpha1.AnnotationVolumeClaimTemplatesPolicy] != "Overrides" {
		t.Errorf("v1beta1-only field not kept when read as v1alpha1: %v", alphaTmpl.Annotations)
	}
	alphaTmpl.Labels = map[string]string{"edited": "in-v1alpha1"}
	if err := env.Client.Update(ctx, alphaTmpl); err != nil {
		t.Fatalf("updating in v1alpha1: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl); err != nil {
		t.Fatal(err)
	}
	if tmpl.Spec.VolumeClaimTemplatesPolicy != extv1beta1.InjectionPolicyOverrides || tmpl.Labels["edited"] != "in-v1alpha1" {
		t.Errorf("after a v1alpha1 update: policy %q, labels %v", tmpl.Spec.VolumeClaimTemplatesPolicy, tmpl.Labels)
	}

	// Two replicas make no sense for a singleton: refused, with the reason.
	two := obj.DeepCopy()
	two.SetName("two")
	if err := unstructured.SetNestedField(two.Object, int64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Create(ctx, two)
	if err == nil || !strings.Contains(err.Error(), "a Sandbox runs at most one Pod: spec.replicas must be 0 (suspended) or 1 (running)") {
		t.Errorf("replicas 2: %v", err)
	}

}
