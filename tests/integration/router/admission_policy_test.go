package router

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/tests"
)

// routerUser is the username the policy matches in config/router.
const routerUser = "system:serviceaccount:agent-sandbox-system:sandbox-router"

func readRouterPolicy(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "router", "admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// installRouterPolicy installs config/router/admission-policy.yaml (or
// content, a variant of it) for the
// router ServiceAccount of ns (routerIdentity's), bound to ns only so other
// tests sharing the API server are not affected.
func installRouterPolicy(t *testing.T, ns string, content ...string) {
	t.Helper()
	raw := readRouterPolicy(t)
	if len(content) > 0 {
		raw = content[0]
	}
	if !strings.Contains(raw, "'"+routerUser+"'") {
		t.Fatalf("the policy does not match %s", routerUser)
	}
	raw = strings.ReplaceAll(raw, routerUser, "system:serviceaccount:"+ns+":sandbox-router")
	docs := strings.Split(raw, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("admission-policy.yaml has %d documents, want a policy and a binding", len(docs))
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), vap); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	name := "router-writes-" + ns
	vap.Name, binding.Name, binding.Spec.PolicyName = name, name, name
	binding.Spec.MatchResources = &admissionv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
	ctx := ctxFor(t)
	if err := env.Client.Create(ctx, vap); err != nil {
		t.Fatalf("the API server refused the policy: %v", err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatalf("the API server refused the binding: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), vap)
	})
}

// TestRouterWritesAreNarrowed: with config/router/admission-policy.yaml
// installed, the router's ServiceAccount (with the deploy bundle's RBAC,
// which grants patch on every Sandbox) can make its two writes, resume on
// connect (spec.operatingMode Running) and activity reports (the
// last-activity annotation), and nothing else: a patch of spec.podTemplate,
// of a label or another annotation, or of operatingMode to Suspended is
// refused by the API server, whatever the field manager. An admin is not
// affected.
func TestRouterWritesAreNarrowed(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	identity := routerIdentity(t, ns)
	installRouterPolicy(t, ns)
	sb := createSandbox(t, ns, "box", nil, map[string]string{"team": "a"}, map[string]string{"keep": "me"})
	suspend(t, sb)
	as, err := client.New(identity, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := resume.NewREST(identity, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer := &resume.Writer{REST: rc}
	patch := func(body string) error {
		return as.Patch(ctx, getSandbox(t, ns, "box"), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	// In force once a change of shutdownTime is refused (a new value
	// each time: an update that changes nothing is always allowed).
	n := 0
	waitUntil(t, 20*time.Second, "the policy is in force", func() bool {
		n++
		err := patch(fmt.Sprintf(`{"spec":{"shutdownTime":"2031-01-01T00:00:%02dZ"}}`, n%60))
		if err != nil && n%20 == 1 {
			t.Logf("probe: %v", err)
		}
		return err != nil && strings.Contains(err.Error(), "may change no field of a Sandbox's spec but operatingMode")
	})
	// The probe's change (if one got through before the policy was in
	// force) is undone by the admin.
	if err := env.Client.Patch(ctx, getSandbox(t, ns, "box"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"shutdownTime":null}}`))); err != nil {
		t.Fatal(err)
	}

	key := resume.Key{Namespace: ns, Name: "box", UID: sb.UID}
	if err := writer.ReportActivity(ctx, key, time.Now()); err != nil {
		t.Errorf("an activity report: %v", err)
	}
	if err := writer.SetRunning(ctx, key); err != nil {
		t.Errorf("resume on connect: %v", err)
	}
	if got := getSandbox(t, ns, "box"); got.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeRunning || got.Annotations[sandboxv1beta1.AnnotationLastActivity] == "" {
		t.Errorf("after the router's writes: operatingMode %s, annotations %v", got.Spec.OperatingMode, got.Annotations)
	}

	for _, tc := range []struct{ what, body, refusal string }{
		{"spec.podTemplate", `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"evil:latest"}]}}}}`, "may change no field of a Sandbox's spec but operatingMode"},
		{"operatingMode Suspended", `{"spec":{"operatingMode":"Suspended"}}`, "may only set spec.operatingMode to Running"},
		{"a label", `{"metadata":{"labels":{"team":"b"}}}`, "may change no label, owner, finalizer or annotation"},
		{"another annotation", `{"metadata":{"annotations":{"agents.x-k8s.io/idle-timeout":"1s"}}}`, "may change no label, owner, finalizer or annotation"},
		{"removing an annotation", `{"metadata":{"annotations":{"keep":null}}}`, "may change no label, owner, finalizer or annotation"},
		{"a finalizer", `{"metadata":{"finalizers":["example.com/hold"]}}`, "may change no label, owner, finalizer or annotation"},
	} {
		if err := patch(tc.body); err == nil || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("the router patching %s: %v, want refused: %s", tc.what, err, tc.refusal)
		}
	}
	// The field manager's name buys nothing: an apply of the pod template
	// under the operating-mode manager is refused too.
	apply := fmt.Sprintf(`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"box","namespace":%q,"uid":%q},`+
		`"spec":{"operatingMode":"Running","podTemplate":{"spec":{"containers":[{"name":"main","image":"evil:latest"}]}}}}`, ns, sb.UID)
	err = rc.Patch(types.ApplyPatchType).Namespace(ns).Resource("sandboxes").Name("box").
		Param("fieldManager", sandboxv1beta1.FieldManagerOperatingMode).Param("force", "true").Body([]byte(apply)).Do(ctx).Error()
	if err == nil || !strings.Contains(err.Error(), "may change no field of a Sandbox's spec") {
		t.Errorf("an apply of spec.podTemplate under %s: %v, want refused", sandboxv1beta1.FieldManagerOperatingMode, err)
	}
	if got := getSandbox(t, ns, "box"); got.Spec.PodTemplate.Spec.Containers[0].Image != "python:3.13-slim" || got.Labels["team"] != "a" {
		t.Errorf("the Sandbox changed: image %s, labels %v", got.Spec.PodTemplate.Spec.Containers[0].Image, got.Labels)
	}
	// The policy is about the router only.
	if err := env.Client.Patch(ctx, getSandbox(t, ns, "box"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"b"}}}`))); err != nil {
		t.Errorf("an admin's patch: %v", err)
	}
}

// TestRouterPolicyCoversEverySpecField: the policy compares every field of
// the served Sandbox spec but operatingMode, so a field added to the API
// cannot be written by the router unnoticed.
func TestRouterPolicyCoversEverySpecField(t *testing.T) {
	policy := readRouterPolicy(t)
	raw, err := os.ReadFile(filepath.Join(tests.CRDDir(), "agents.x-k8s.io_sandboxes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, v := range crd.Spec.Versions {
		if v.Name != sandboxv1beta1.GroupVersion.Version {
			continue
		}
		for field := range v.Schema.OpenAPIV3Schema.Properties["spec"].Properties {
			checked++
			if field == "operatingMode" {
				continue
			}
			if want := "object.spec.?" + field + " == oldObject.spec.?" + field; !strings.Contains(policy, want) {
				t.Errorf("the policy does not compare spec.%s (want %q)", field, want)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no spec fields found in the CRD")
	}
}
