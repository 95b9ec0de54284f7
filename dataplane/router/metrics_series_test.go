package router

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestResumeSeriesFromTheStart: every result of sandbox_router_resumes_total
// is served at 0 before the first resume, so that rates and alerts over it
// (AgentSandboxRouterResumesFailing) have series to work on.
func TestResumeSeriesFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg)
	want := `
# HELP sandbox_router_resumes_total Resumes on connect the router made (one per Sandbox however many requests waited for it), by result (resumed, timeout, error).
# TYPE sandbox_router_resumes_total counter
sandbox_router_resumes_total{result="error"} 0
sandbox_router_resumes_total{result="resumed"} 0
sandbox_router_resumes_total{result="timeout"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_router_resumes_total"); err != nil {
		t.Error(err)
	}
}
