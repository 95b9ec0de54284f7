package bench

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestBenchClaims measures only the claims: the claims floor, then the
// controller serving the same claims, on a fresh cluster (TestBench
// measures them too, after the Sandbox phases). It runs with
// AGENT_SANDBOX_BENCH=1 and only when -run names it
// (BENCH_RUN=TestBenchClaims make bench); BENCH_CLAIMS sets the claims at
// once (default 100) and BENCH_OUT a file for the JSON (the warm_claims
// document).
func TestBenchClaims(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "TestBenchClaims") {
		// make bench's TestBench measures the claims too.
		t.Skip("TestBench measures the claims; TestBenchClaims runs only when named (BENCH_RUN=TestBenchClaims)")
	}
	claims := 100
	if v := os.Getenv("BENCH_CLAIMS"); v != "" {
		var err error
		if claims, err = strconv.Atoi(v); err != nil || claims <= 0 {
			t.Fatalf("BENCH_CLAIMS=%q: want a positive integer", v)
		}
	}
	ctx := context.Background()
	workdir := t.TempDir()
	local, err := cluster.Start(ctx, cluster.Options{
		Name: "bench", Workdir: workdir, Nodes: 10, InstallCRDs: true, RuntimeClasses: []string{"gvisor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := local.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	watched := newWatch(t, local.Config, "", &corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{})
	startWatch(t, watched)
	clusterDirOf = filepath.Join(local.Workdir, "clusters", local.Name)

	// A first round, not counted, warms the new cluster up (TestBench's
	// earlier phases do it there): the API server's first writes of each
	// kind are slower.
	measureClaimsFloor(t, local.Config, c, watched, claims, min(20, claims))
	floor := measureClaimsFloor(t, local.Config, c, watched, claims, min(20, claims))
	t.Logf("claims floor done: p99 %.0f ms, paced p99 %.0f ms", floor.P99Ms, floor.PacedP99Ms)
	ctrl := startController(t, local.Kubeconfig)
	defer ctrl.stop(t)
	settle()
	res := benchClaims(t, c, watched, ctrl, mkNamespace(t, c, "claims"), claims)
	res.withFloor(floor)
	report(t, res, "BENCH_OUT")
}

// withFloor sets the claims' floor and their ratios to it.
func (res *Claims) withFloor(floor ClaimsFloor) {
	res.Floor = floor
	res.P99RatioToFloor = res.P99Ms / floor.P99Ms
	res.PacedP99RatioToFloor = res.PacedP99Ms / floor.PacedP99Ms
	res.ClaimsPerSecondToFloor = res.ClaimsPerSecond / floor.ClaimsPerSecond
}
