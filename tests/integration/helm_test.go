package integration

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests/helm"
)

// TestHelmChartDryRun is `helm template | kubectl apply --server-side
// --dry-run=server` against a real API server: every object the chart
// renders, with its defaults and with every optional part on, passes the
// API server's validation (schemas, CEL rules, admission) without being
// stored. The PrometheusRule is left out: envtest serves no
// prometheus-operator CRDs (its expressions are checked in
// tests/monitoring and against /metrics in tests/e2e).
func TestHelmChartDryRun(t *testing.T) {
	ns := env.Namespace(t)
	for _, set := range []map[string]any{
		{},
		{
			"controller":        map[string]any{"extensions": true, "replicas": 2, "podDisruptionBudget": map[string]any{"enabled": true}, "defaultRuntimeClass": "gvisor"},
			"router":            map[string]any{"enabled": true, "transport": "port-forward"},
			"policyBundles":     map[string]any{"restricted": "warn", "baseline": "enforce"},
			"admissionPolicies": map[string]any{"enabled": true, "bundles": []any{"runtime-isolation", "baseline", "restricted"}},
			"policyModeLabels":  map[string]any{"enabled": true},
			"monitoring":        map[string]any{"prometheusRule": map[string]any{"enabled": true}, "dashboard": map[string]any{"enabled": true}},
		},
	} {
		objs, err := helm.Template(context.Background(), ns, set)
		if err != nil {
			t.Fatal(err)
		}
		applied := 0
		for _, o := range objs {
			if o.GetKind() == "PrometheusRule" {
				continue
			}
			u := &unstructured.Unstructured{Object: o.Object}
			if err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.ForceOwnership, client.FieldOwner("helm")); err != nil {
				t.Errorf("server-side dry-run apply of %s: %v", helm.Key(o), err)
				continue
			}
			applied++
		}
		// The defaults render 16 objects: 4 CRDs, RBAC, the webhook's and
		// the controller's; a change in that number is worth a look here.
		if applied < 16 {
			t.Errorf("only %d objects applied", applied)
		}
		t.Logf("%d objects pass a server-side dry-run apply", applied)
	}
}
