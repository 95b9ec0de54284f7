package helm

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
)

// values parses --set style values.
func values(t *testing.T, set string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if set == "" {
		return v
	}
	if err := strvals.ParseInto(set, v); err != nil {
		t.Fatalf("values %q: %v", set, err)
	}
	return v
}

// TestLint is `helm lint --strict` on the chart, with its defaults and
// with every optional part on.
func TestLint(t *testing.T) {
	for _, set := range []string{"",
		"router.enabled=true,router.transport=port-forward,admissionPolicies.enabled=true,policyModeLabels.enabled=true," +
			"monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,controller.extensions=true,controller.replicas=2,controller.podDisruptionBudget.enabled=true," +
			"router.trustPortForward=true,router.e2b.enabled=true,router.e2b.apiKeySecrets=true,tracing.otlpEndpoint=http://collector:4318",
	} {
		if errs := Lint(values(t, set)); len(errs) > 0 {
			t.Errorf("helm lint --strict (%s): %v", set, errs)
		}
	}
}

// TestSchemaRefusesBadValues checks that values.schema.json makes bad
// values fail at install (and lint), with a message naming the value.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"controller.replicas=-1", "replicas"},
		{"controller.replicaz=2", "replicaz"},
		{"webhook.certManagement=cert-manager", "certManagement"},
		{"policyBundles.baseline=strict", "baseline"},
		{"policyBundles.nosuch=enforce", "nosuch"},
		{"router.transport=tunnel", "transport"},
		{"webhook.failurePolicy=Never", "failurePolicy"},
		{"controller.extraArgs[0]=-v", "extraArgs"},
		{"controller.replicas=2,controller.leaderElection=false", "leaderElection"},
		{"admissionPolicies.bundles[0]=nosuch", "bundles"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"tracing.otlpEndpoint=collector:4318", "otlpEndpoint"},
		{"router.e2b.tokenKeySecret=", "tokenKeySecret"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := Template(t.Context(), Namespace, values(t, tc.set))
			if err == nil {
				t.Fatalf("rendered with %s; want a schema error", tc.set)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
