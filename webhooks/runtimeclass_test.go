package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// changing is a defaults source whose value the test changes, as the
// controller's follows the cluster's RuntimeClasses.
type changing struct{ class string }

func (c *changing) Current() render.Defaults { return render.Defaults{RuntimeClassName: c.class} }

// An upstream Sandbox without a runtime class is admitted on a default
// install when the cluster has an isolating class: the webhook judges the
// Pod the controller will create, with the controller's default. An
// explicit class outside the allowlist is refused whatever the default.
func TestValidatorDefaultRuntimeClass(t *testing.T) {
	ctx := context.Background()
	v := validator(t, policy.DefaultBundles...)
	defaults := &changing{}
	v.Defaults = defaults
	plain := sandbox(func(s *corev1.PodSpec) { s.RuntimeClassName = nil })

	resp := v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", plain, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "Pod default/box: runtimeClassName (unset) is not allowed for sandboxes, and the cluster has no isolating RuntimeClass to default to") {
		t.Errorf("no isolating class in the cluster: allowed=%v %q, want a denial saying so", resp.Allowed, resp.Result.Message)
	}

	defaults.class = "gvisor" // a gvisor RuntimeClass was installed
	if resp := v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", plain, nil)); !resp.Allowed {
		t.Errorf("plain upstream Sandbox with the default gvisor: refused %q", resp.Result.Message)
	}
	runc := sandbox(func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("runc") })
	resp = v.Handle(ctx, request(t, admissionv1.Create, "Sandbox", runc, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "runtimeClassName runc is not allowed for sandboxes; set spec.podTemplate.spec.runtimeClassName to one of: gvisor, kata") {
		t.Errorf("explicit runc: allowed=%v %q, want a denial", resp.Allowed, resp.Result.Message)
	}

	// Templates too: the Sandboxes they make mirror them and get the
	// default in their Pods.
	tmpl := &extv1beta1.SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "default"},
	}
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	if resp := v.Handle(ctx, request(t, admissionv1.Create, "SandboxTemplate", tmpl, nil)); !resp.Allowed {
		t.Errorf("template without a class, default gvisor: refused %q", resp.Result.Message)
	}
	defaults.class = ""
	if resp := v.Handle(ctx, request(t, admissionv1.Create, "SandboxTemplate", tmpl, nil)); resp.Allowed {
		t.Error("template without a class and no isolating class in the cluster: allowed")
	}
}
