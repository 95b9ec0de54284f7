package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

func validator(t *testing.T, bundles ...string) *Validator {
	t.Helper()
	set, err := policy.LoadConfig(policy.Config{Bundles: bundles})
	if err != nil {
		t.Fatal(err)
	}
	h := &policy.Holder{}
	h.Set(set)
	return &Validator{Policy: h, ControllerNamespace: "agent-sandbox-system"}
}

func request(t *testing.T, op admissionv1.Operation, kind string, obj, old runtime.Object) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Kind: metav1.GroupVersionKind{Kind: kind}, Namespace: "default", Name: "box",
		Object: runtime.RawExtension{Raw: raw},
	}}
	if old != nil {
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			t.Fatal(err)
		}
	}
	return req
}

func sandbox(mutate ...func(*corev1.PodSpec)) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default"},
	}
	sb.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	for _, m := range mutate {
		m(&sb.Spec.PodTemplate.Spec)
	}
	return sb
}

func TestValidatorChecksThePodASandboxBecomes(t *testing.T) {
	v := validator(t, policy.DefaultBundles...)
	ctx := context.Background()
	if resp := v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", sandbox(), nil)); !resp.Allowed {
		t.Fatalf("compliant Sandbox refused: %+v", resp.Result)
	}
	resp := v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", sandbox(func(s *corev1.PodSpec) {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}), nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "Pod default/box: privileged containers are not allowed: agent") {
		t.Fatalf("privileged Sandbox: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}
	if resp.Result.Code != 403 {
		t.Errorf("code %d, want 403", resp.Result.Code)
	}

	// An update that leaves the spec alone is not judged again.
	bad := sandbox(func(s *corev1.PodSpec) { s.RuntimeClassName = nil })
	relabeled := bad.DeepCopy()
	relabeled.Labels = map[string]string{"team": "x"}
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", relabeled, bad)); !resp.Allowed {
		t.Errorf("a metadata-only update was refused: %q", resp.Result.Message)
	}
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", bad, sandbox())); resp.Allowed {
		t.Error("a spec update to a non-gVisor Pod was allowed")
	}
}

func TestValidatorTemplates(t *testing.T) {
	v := validator(t, policy.DefaultBundles...)
	v.Defaults = render.Defaults{RuntimeClassName: "kata"}
	tmpl := &extv1beta1.SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "default"},
	}
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	// No runtime class in the template, but the controller's default fills it.
	if resp := v.Handle(context.Background(), request(t, admissionv1.Create, "SandboxTemplate", tmpl, nil)); !resp.Allowed {
		t.Fatalf("template refused: %q", resp.Result.Message)
	}
	tmpl.Spec.PodTemplate.Spec.HostNetwork = true
	resp := v.Handle(context.Background(), request(t, admissionv1.Create, "SandboxTemplate", tmpl, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "hostNetwork") {
		t.Fatalf("hostNetwork template: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}
}

func TestValidatorWarnings(t *testing.T) {
	src, _ := policy.Bundle(policy.BundleBaseline)
	set, err := policy.Load(policy.Source{Name: "warn", Data: []byte(strings.Replace(string(src.Data), "validationActions: [Deny]", "validationActions: [Warn]", 1))})
	if err != nil {
		t.Fatal(err)
	}
	h := &policy.Holder{}
	h.Set(set)
	v := &Validator{Policy: h}
	resp := v.Handle(context.Background(), request(t, admissionv1.Create, "Sandbox", sandbox(func(s *corev1.PodSpec) { s.HostPID = true }), nil))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "hostPID") {
		t.Errorf("allowed=%v warnings=%v, want allowed with one warning", resp.Allowed, resp.Warnings)
	}
}
