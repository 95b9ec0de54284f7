package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/policy"
)

// TestValidatorModes: the webhook acts in the bundle modes of the object's
// namespace: enforce refuses, warn admits with kubectl warnings, audit
// admits with audit annotations (and tells Observe), off skips; exempt
// namespaces are never blocked; a bad mode label enforces and warns.
func TestValidatorModes(t *testing.T) {
	set, err := policy.LoadConfig(policy.Config{Modes: policy.DefaultModes()})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]string{
		"default":   nil,
		"warned":    {policy.ModeLabel(policy.BundleBaseline): "warn"},
		"audited":   {policy.ModeLabel(policy.BundleBaseline): "audit"},
		"off":       {policy.ModeLabel(policy.BundleBaseline): "off"},
		"typo":      {policy.ModeLabel(policy.BundleBaseline): "Warn"},
		"strict":    {policy.ModeLabel(policy.BundleRestricted): "enforce", policy.ModeLabel(policy.BundleBaseline): "off"},
		"exempt-ns": nil,
	}
	h := &policy.Holder{
		NamespaceLabels: func(_ context.Context, ns string) map[string]string { return labels[ns] },
		Exempt:          []string{"exempt-ns"},
	}
	h.Set(set)
	var observed []policy.Decision
	v := &Validator{Policy: h, ControllerNamespace: "agent-sandbox-system", Observe: func(ds []policy.Decision) { observed = append(observed, ds...) }}
	privileged := sandbox(func(s *corev1.PodSpec) {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	for _, tc := range []struct {
		ns      string
		allowed bool
		warning string // in the warnings, if set
		audit   bool
	}{
		{ns: "default", allowed: false},
		{ns: "warned", allowed: true, warning: "privileged containers are not allowed"},
		{ns: "audited", allowed: true, audit: true},
		{ns: "off", allowed: true},
		{ns: "typo", allowed: false, warning: `"Warn" is not a policy mode`},
		{ns: "exempt-ns", allowed: true, warning: "privileged containers are not allowed"},
	} {
		observed = nil
		req := request(t, admissionv1.Create, "Sandbox", privileged, nil)
		req.Namespace = tc.ns
		resp := v.Handle(context.Background(), req)
		if resp.Allowed != tc.allowed {
			t.Errorf("%s: allowed=%v, want %v (%+v)", tc.ns, resp.Allowed, tc.allowed, resp.Result)
		}
		if !tc.allowed && (resp.Result == nil || !strings.Contains(resp.Result.Message, "privileged containers are not allowed")) {
			t.Errorf("%s: denial %+v", tc.ns, resp.Result)
		}
		if tc.warning != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.warning) {
			t.Errorf("%s: warnings %q lack %q", tc.ns, resp.Warnings, tc.warning)
		}
		if tc.warning == "" && len(resp.Warnings) > 0 {
			t.Errorf("%s: unexpected warnings %q", tc.ns, resp.Warnings)
		}
		if got := resp.AuditAnnotations["audit-agent-sandbox-baseline"]; tc.audit != (got != "") {
			t.Errorf("%s: audit annotations %v", tc.ns, resp.AuditAnnotations)
		}
		if tc.ns != "off" && len(observed) == 0 {
			t.Errorf("%s: no decision observed", tc.ns)
		}
	}
	// restricted, off by default, can be enforced by a namespace.
	req := request(t, admissionv1.Create, "Sandbox", sandbox(), nil)
	req.Namespace = "strict"
	if resp := v.Handle(context.Background(), req); resp.Allowed || !strings.Contains(resp.Result.Message, "agent-sandbox-restricted") {
		t.Errorf("restricted enforced by label: %+v", resp.Result)
	}
	req.Namespace = "default"
	if resp := v.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("compliant Sandbox refused by default: %+v", resp.Result)
	}
}
