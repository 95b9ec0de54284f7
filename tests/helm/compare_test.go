package helm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartMatchesKustomize renders the chart and the kustomize bundles
// with the same settings and compares the objects, so neither can change
// without the other. Components are built through the overlays of
// testdata/ (a component cannot be built on its own).
func TestChartMatchesKustomize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string // --set style: a.b=c,d=e
		dirs   []string
	}{
		{name: "default", dirs: []string{"default"}},
		{name: "extensions", values: "controller.extensions=true", dirs: []string{"extensions"}},
		{name: "router", values: "router.enabled=true", dirs: []string{"default", "router"}},
		{name: "router e2b", values: "router.enabled=true,router.e2b.enabled=true", dirs: []string{"default", "../tests/helm/testdata/router-e2b"}},
		{name: "router trust-port-forward", values: "router.enabled=true,router.trustPortForward=true",
			dirs: []string{"default", "../tests/helm/testdata/router-trust-port-forward"}},
		{name: "admission policies", values: "admissionPolicies.enabled=true", dirs: []string{"default", "policies"}},
		{name: "policy mode labels", values: "policyModeLabels.enabled=true", dirs: []string{"default", "policy-labels"}},
		{name: "monitoring", values: "monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true", dirs: []string{"default", "monitoring"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chart, err := Template(context.Background(), Namespace, values(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			var bundle []*unstructured.Unstructured
			for _, d := range tc.dirs {
				objs, err := Kustomize(d)
				if err != nil {
					t.Fatal(err)
				}
				bundle = append(bundle, objs...)
			}
			got, err := Normalize(chart)
			if err != nil {
				t.Fatalf("chart: %v", err)
			}
			want, err := Normalize(bundle)
			if err != nil {
				t.Fatalf("kustomize: %v", err)
			}
			if diff := cmp.Diff(Keys(want), Keys(got)); diff != "" {
				t.Fatalf("objects differ (-kustomize +chart):\n%s", diff)
			}
			for _, k := range Keys(want) {
				if diff := cmp.Diff(want[k], got[k]); diff != "" {
					t.Errorf("%s differs (-kustomize +chart):\n%s", k, diff)
				}
			}
		})
	}
}

// TestChartSettings checks the settings the kustomize bundle has no
// counterpart for: each value reaches the flag or field it documents.
func TestChartSettings(t *testing.T) {
	objs, err := Template(context.Background(), "sandboxes", values(t,
		"controller.replicas=3,controller.podDisruptionBudget.enabled=true,controller.defaultRuntimeClass=gvisor,"+
			"policyBundles.restricted=warn,policyBundles.baseline=enforce,webhook.certManagement=provided,webhook.certSecret=my-cert,"+
			"controller.nodeSelector.pool=system,image.tag=v9,crds.install=false,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"))
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := Normalize(objs)
	if err != nil {
		t.Fatal(err)
	}
	dep := byKey["Deployment sandboxes/agent-sandbox-controller"]
	if dep == nil {
		t.Fatalf("no controller Deployment in %v", Keys(byKey))
	}
	d := &unstructured.Unstructured{Object: dep}
	if n := fmt.Sprint(at(d.Object, "spec", "replicas")); n != "3" {
		t.Errorf("replicas = %s, want 3", n)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"--default-runtime-class=gvisor", "--policy-bundles=baseline=enforce,restricted=warn", "--webhook-cert-management=provided", "--leader-elect=true"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %s", joined, want)
		}
	}
	if c["image"] != "sandbox-controller:v9" {
		t.Errorf("image = %v", c["image"])
	}
	if sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "spec", "nodeSelector"); sel["pool"] != "system" {
		t.Errorf("nodeSelector = %v", sel)
	}
	if s := at(d.Object, "spec", "template", "spec", "volumes", 0, "secret", "secretName"); s != "my-cert" {
		t.Errorf("webhook certificate volume's secret = %v, want my-cert", s)
	}
	for _, k := range []string{"PodDisruptionBudget sandboxes/agent-sandbox-controller", "PrometheusRule sandboxes/agent-sandbox",
		"ConfigMap sandboxes/agent-sandbox-dashboard", "ValidatingWebhookConfiguration /agent-sandbox-validating-webhook"} {
		if byKey[k] == nil {
			t.Errorf("no %s in %v", k, Keys(byKey))
		}
	}
	for _, k := range Keys(byKey) {
		if strings.HasPrefix(k, "CustomResourceDefinition") {
			t.Errorf("crds.install=false rendered %s", k)
		}
		if strings.Contains(k, "agent-sandbox-system") {
			t.Errorf("%s is in the bundle's namespace, not the release's", k)
		}
	}
	// The webhook configuration follows the release's namespace.
	wh := byKey["ValidatingWebhookConfiguration /agent-sandbox-validating-webhook"]
	if ns := at(wh, "webhooks", 0, "clientConfig", "service", "namespace"); ns != "sandboxes" {
		t.Errorf("webhook service namespace %v, want sandboxes", ns)
	}
	if ns := at(wh, "webhooks", 0, "namespaceSelector", "matchExpressions", 1, "values", 1); ns != "sandboxes" {
		t.Errorf("webhook never-blocked namespace %v, want sandboxes", ns)
	}
}

// TestChartRouterSettings: the router's settings without a kustomize
// counterpart reach their flags: tracing (both binaries), E2B API keys in
// the release's Secrets (flag, Role and RoleBinding in the release's
// namespace) and the token key's Secret.
func TestChartRouterSettings(t *testing.T) {
	const endpoint = "http://otel-collector.monitoring:4318"
	objs, err := Template(context.Background(), "sandboxes", values(t,
		"router.enabled=true,router.e2b.enabled=true,router.e2b.apiKeySecrets=true,router.e2b.tokenKeySecret=my-key,tracing.otlpEndpoint="+endpoint))
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := Normalize(objs)
	if err != nil {
		t.Fatal(err)
	}
	for dep, want := range map[string][]string{
		"Deployment sandboxes/agent-sandbox-controller": {"--otlp-endpoint=" + endpoint},
		"Deployment sandboxes/sandbox-router":           {"--otlp-endpoint=" + endpoint, "--e2b", "--e2b-api-key-namespace=sandboxes"},
	} {
		d := byKey[dep]
		if d == nil {
			t.Fatalf("no %s in %v", dep, Keys(byKey))
		}
		args := fmt.Sprint(at(d, "spec", "template", "spec", "containers", 0, "args"))
		for _, w := range want {
			if !strings.Contains(args, w+" ") && !strings.HasSuffix(args, w+"]") {
				t.Errorf("%s args %s lack %s", dep, args, w)
			}
		}
	}
	if s := at(byKey["Deployment sandboxes/sandbox-router"], "spec", "template", "spec", "volumes", 0, "secret", "secretName"); s != "my-key" {
		t.Errorf("token key volume's secret = %v, want my-key", s)
	}
	for _, k := range []string{"Role sandboxes/agent-sandbox-router-e2b-keys", "RoleBinding sandboxes/agent-sandbox-router-e2b-keys"} {
		if byKey[k] == nil {
			t.Errorf("no %s in %v", k, Keys(byKey))
		}
	}
	if ns := at(byKey["RoleBinding sandboxes/agent-sandbox-router-e2b-keys"], "subjects", 0, "namespace"); ns != "sandboxes" {
		t.Errorf("key reader's ServiceAccount namespace %v, want sandboxes", ns)
	}
}

// at walks maps (string keys) and slices (int indexes); nil when absent.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}
