package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// erroring is a policy whose rule cannot be evaluated on a one-container
// Pod (index out of range at run time), with the given failurePolicy.
func erroring(failurePolicy string) policy.Source {
	return policy.Source{Name: "erroring.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: erroring}
spec:
  failurePolicy: ` + failurePolicy + `
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}
  validations:
  - expression: "object.spec.containers[3].name != 'forbidden'"
    message: third container checked
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: erroring}
spec:
  policyName: erroring
  validationActions: [Deny]
`)}
}

func loadSet(t *testing.T, srcs ...policy.Source) *policy.Set {
	t.Helper()
	set, err := policy.Load(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func bundles(t *testing.T) *policy.Set {
	t.Helper()
	set, err := policy.LoadConfig(policy.Config{Bundles: policy.DefaultBundles})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newSandbox(name string, mutate ...func(*corev1.PodSpec)) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	sb.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	for _, m := range mutate {
		m(&sb.Spec.PodTemplate.Spec)
	}
	return sb
}

func privileged(s *corev1.PodSpec) {
	s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
}

// TestNewSandboxesFailClosed: what a pool, a cold claim or a template is
// about to create is not created when a policy cannot be evaluated (unless
// the policy itself says failurePolicy: Ignore, as the API server honours),
// nor when it cannot be rendered.
func TestNewSandboxesFailClosed(t *testing.T) {
	ctx := context.Background()
	var denied *policyError
	err := checkNewSandbox(ctx, holding(loadSet(t, erroring("Fail"))), newSandbox("box"), render.Defaults{})
	if !errors.As(err, &denied) || !strings.Contains(err.Error(), "Pod ns/box") {
		t.Errorf("evaluation error with failurePolicy Fail: %v, want a denial", err)
	}
	if err := checkNewSandbox(ctx, holding(loadSet(t, erroring("Ignore"))), newSandbox("box"), render.Defaults{}); err != nil {
		t.Errorf("evaluation error with failurePolicy Ignore: %v, want allowed", err)
	}
	// The Service of a Sandbox is named after it: "9lives" cannot be.
	unrenderable := newSandbox("9lives")
	unrenderable.Spec.Service = ptr.To(true)
	var terminal *terminalError
	if err := checkNewSandbox(ctx, holding(bundles(t)), unrenderable, render.Defaults{}); !errors.As(err, &terminal) {
		t.Errorf("unrenderable Sandbox: %v, want a terminal error", err)
	}
	if err := checkNewSandbox(ctx, holding(bundles(t)), newSandbox("box", privileged), render.Defaults{}); !errors.As(err, &denied) {
		t.Errorf("privileged Sandbox: %v, want a denial", err)
	}
	if err := checkNewSandbox(ctx, holding(bundles(t)), newSandbox("box"), render.Defaults{}); err != nil {
		t.Errorf("compliant Sandbox: %v", err)
	}
}

// TestAdoptedPodIsJudgedAsTheSandboxsPod: a Pod about to be adopted is
// judged with the labels adoption gives it (the built-in bindings select
// sandbox Pods by label, which the Pod may not carry yet).
func TestAdoptedPodIsJudgedAsTheSandboxsPod(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox("box")
	sb.UID = types.UID("uid-1")
	desired, err := render.Sandbox(render.SandboxInputs{Sandbox: sb, PodName: "box"})
	if err != nil {
		t.Fatal(err)
	}
	live := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", Labels: map[string]string{sandboxv1beta1.LabelAdoptable: sandboxv1beta1.AdoptableValue}},
		Spec:       *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
	privileged(&live.Spec)
	_, err = checkSandbox(ctx, bundles(t), sb, desired, creating{adopt: live})
	var denied *policyError
	if !errors.As(err, &denied) || !strings.HasPrefix(err.Error(), "the existing Pod is not adopted: Pod ns/box: privileged containers are not allowed: agent") {
		t.Errorf("privileged Pod to adopt: %v", err)
	}
	if len(live.Labels) != 1 || len(live.OwnerReferences) != 0 {
		t.Errorf("the live Pod was modified: %v %v", live.Labels, live.OwnerReferences)
	}
	live.Spec.Containers[0].SecurityContext = nil
	if _, err := checkSandbox(ctx, bundles(t), sb, desired, creating{adopt: live}); err != nil {
		t.Errorf("compliant Pod to adopt: %v", err)
	}
}

// TestTemplateMemberUsesTheDefaults: a template is judged by the Sandbox a
// pool or claim makes of it, with the controller's defaults.
func TestTemplateMemberUsesTheDefaults(t *testing.T) {
	ctx := context.Background()
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "9-templates"}}
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	var denied *policyError
	if err := checkNewSandbox(ctx, holding(bundles(t)), render.TemplateProbe(tmpl), render.Defaults{}); !errors.As(err, &denied) ||
		!strings.Contains(err.Error(), "the cluster has no isolating RuntimeClass") {
		t.Errorf("no runtime class, no default: %v, want a denial saying the cluster has no isolating class", err)
	}
	if err := checkNewSandbox(ctx, holding(bundles(t)), render.TemplateProbe(tmpl), render.Defaults{RuntimeClassName: "gvisor"}); err != nil {
		t.Errorf("no runtime class, default gvisor: %v", err)
	}
}

// TestTemplateDenialIsReportedOnce: a denied template gets one event per
// reason, however often it is looked at, and a new one when the reason
// changes or after it was fixed.
func TestTemplateDenialIsReportedOnce(t *testing.T) {
	ctx := context.Background()
	rec := events.NewFakeRecorder(10)
	h := &policy.Holder{}
	h.Set(bundles(t))
	r := &TemplateReconciler{Policy: h, Recorder: rec, Defaults: render.Defaults{RuntimeClassName: "gvisor"}}
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tpl"}}
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}}
	privileged(&tmpl.Spec.PodTemplate.Spec)
	check := func() {
		t.Helper()
		// The template has no UID: its plan stops after the refusal
		// event, before anything is written.
		plan, err := r.decide(ctx, tmpl, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.run(ctx, tmpl, plan); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		check()
	}
	tmpl.Spec.PodTemplate.Spec.HostPID = true // another reason
	check()
	check()
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a"}}} // fixed
	check()
	privileged(&tmpl.Spec.PodTemplate.Spec) // broken again
	check()
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 3 || !strings.Contains(got[0], "Warning PolicyDenied") || !strings.Contains(got[1], "and 1 more") {
		t.Errorf("events %q: want one per reason (privileged, +hostPID, privileged again)", got)
	}
}

// holding puts a set in a holder, as the controller has it.
func holding(s *policy.Set) *policy.Holder {
	h := &policy.Holder{}
	h.Set(s)
	return h
}
