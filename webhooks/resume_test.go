package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

func annotated(o client.Object, annotations map[string]string) client.Object {
	o.SetAnnotations(annotations)
	return o
}

func templateObject() *extv1beta1.SandboxTemplate {
	t := &extv1beta1.SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default"},
	}
	t.Spec.PodTemplate.Spec = sandbox().Spec.PodTemplate.Spec
	return t
}

func TestResumeAnnotationsAreValidatedAtAdmission(t *testing.T) {
	idle := func(v string) map[string]string { return map[string]string{sandboxv1beta1.AnnotationIdleTimeout: v} }
	kinds := map[string]func() client.Object{
		"Sandbox":         func() client.Object { return sandbox() },
		"SandboxTemplate": func() client.Object { return templateObject() },
		"SandboxClaim":    func() client.Object { return claimObject() },
	}
	for kind, obj := range kinds {
		for name, tc := range map[string]struct {
			annotations map[string]string
			want        string // empty: allowed
		}{
			"none":            {},
			"valid timeout":   {annotations: idle("15m")},
			"off":             {annotations: idle("0")},
			"resume only":     {annotations: map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}},
			"not a duration":  {annotations: idle("15 minutes"), want: `annotation agents.x-k8s.io/idle-timeout: "15 minutes" is not a duration`},
			"too short":       {annotations: idle("500ms"), want: `annotation agents.x-k8s.io/idle-timeout: "500ms" is shorter than 1s`},
			"not a boolean":   {annotations: map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "yes"}, want: `annotation agents.x-k8s.io/resume-on-connect: "yes" is not a boolean`},
			"last activity":   {annotations: map[string]string{sandboxv1beta1.AnnotationLastActivity: "whenever"}},
			"other annotated": {annotations: map[string]string{"idle-timeout": "soon"}},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				// Without policies too: the check does not depend on them.
				for _, v := range []*Validator{validator(t, policy.DefaultBundles...), {Policy: &policy.Holder{}}} {
					resp := v.Handle(context.Background(), request(t, admissionv1.Create, kind, annotated(obj(), tc.annotations), nil))
					if tc.want == "" {
						if !resp.Allowed {
							t.Fatalf("refused: %q", resp.Result.Message)
						}
						continue
					}
					if resp.Allowed || !strings.Contains(resp.Result.Message, kind+" box: "+tc.want) {
						t.Fatalf("allowed=%v %q, want refused with %q", resp.Allowed, resp.Result.Message, tc.want)
					}
					if resp.Result.Code != 403 {
						t.Errorf("code %d, want 403", resp.Result.Code)
					}
				}
			})
		}
	}
}

// An object whose invalid value predates the check (or got past it) can
// still be changed otherwise, and fixed; changing the value to another
// invalid one is refused. The controller's own writes are not judged.
func TestResumeAnnotationsOnUpdate(t *testing.T) {
	v := validator(t, policy.DefaultBundles...)
	v.ControllerUser = controllerUser
	ctx := context.Background()
	bad := annotated(sandbox(), map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "soon"})
	relabeled := bad.DeepCopyObject().(client.Object)
	relabeled.SetLabels(map[string]string{"team": "x"})
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", relabeled, bad)); !resp.Allowed {
		t.Errorf("an update leaving an invalid value alone was refused: %q", resp.Result.Message)
	}
	fixed := annotated(sandbox(), map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1h"})
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", fixed, bad)); !resp.Allowed {
		t.Errorf("fixing the value was refused: %q", resp.Result.Message)
	}
	worse := annotated(sandbox(), map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "later"})
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", worse, bad)); resp.Allowed {
		t.Error("changing to another invalid value was allowed")
	}
	if resp := v.Handle(ctx, request(t, admissionv1.Update, "Sandbox", worse, fixed)); resp.Allowed {
		t.Error("breaking a valid value was allowed")
	}
	req := request(t, admissionv1.Create, "Sandbox", worse, nil)
	req.UserInfo.Username = controllerUser
	if resp := v.Handle(ctx, req); !resp.Allowed {
		t.Errorf("the controller's copy of a claim's annotations was refused: %q", resp.Result.Message)
	}
	// SandboxWarmPools have no resume annotations of their own.
	pool := &extv1beta1.SandboxWarmPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "soon"}},
	}
	if resp := v.Handle(ctx, request(t, admissionv1.Create, "SandboxWarmPool", pool, nil)); !resp.Allowed {
		t.Errorf("a pool was judged on resume annotations: %q", resp.Result.Message)
	}
}
