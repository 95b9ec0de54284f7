package monitoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (le, webhook) (rate(controller_runtime_webhook_latency_seconds_bucket{job=~"$job"}[$__rate_interval]))`,
			[]string{"controller_runtime_webhook_latency_seconds_bucket"}},
		{`histogram_quantile(0.95, sum by (le) (rate(a_ms_bucket[10m]))) > 5e3`, []string{"a_ms_bucket"}},
		{`max by (namespace, warm_pool) (ready) == 0 and on (namespace, warm_pool) max without (pod) (wanted) > 0`, []string{"ready", "wanted"}},
		{`sum(rate(x_total{code!="200", path="/a{b}[c]"}[5m])) / ignoring(code) group_left(webhook) sum(rate(x_total[5m] offset 1h))`, []string{"x_total"}},
		{`min(expiry_seconds) - time() < 21 * 86400`, []string{"expiry_seconds"}},
		{`sum(rate(a[1m])) - (sum(rate(b{l='x'}[1m])) or vector(0))`, []string{"a", "b"}},
		{`rate(a[5m:1m]) unless bool c`, []string{"a", "c"}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
		}
	}
	for _, bad := range []string{`a{b="c"`, `rate(a[5m)`, `a{b="c}`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestServed(t *testing.T) {
	families := map[string]bool{"h": true, "c_total": true}
	for name, want := range map[string]bool{"h": true, "h_bucket": true, "h_count": true, "h_sum": true, "c_total": true, "c": false, "h_total": false} {
		if got := Served(name, families); got != want {
			t.Errorf("Served(%s) = %t, want %t", name, got, want)
		}
	}
}

// TestUsesParse reads the dashboard and the alerts: every expression
// tokenizes and selects at least one metric, and each required subject
// (issue 30) has a panel or an alert.
func TestUsesParse(t *testing.T) {
	uses, err := Uses()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	for _, u := range uses {
		names, err := MetricNames(u.Expr)
		if err != nil {
			t.Fatalf("%s: %v", u.Where, err)
		}
		if len(names) == 0 {
			t.Errorf("%s selects no metric: %s", u.Where, u.Expr)
		}
		for _, n := range names {
			all[n] = true
		}
	}
	for _, want := range []string{
		"agent_sandboxes", "agent_sandbox_claim_startup_latency_ms_bucket", "agent_sandbox_warm_pool_ready_replicas",
		"controller_runtime_reconcile_errors_total", "controller_runtime_webhook_latency_seconds_bucket",
		"agent_sandbox_admission_policy_decisions_total", "rest_client_requests_total", "sandbox_router_requests_total",
		"sandbox_router_request_duration_seconds_bucket", "sandbox_router_resumes_total", "agent_sandbox_webhook_certificate_expiry_timestamp_seconds",
	} {
		if !all[want] {
			t.Errorf("no panel or alert uses %s", want)
		}
	}
}
