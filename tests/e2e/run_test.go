package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestMakeRun runs what `make run` runs (kubectl-sandbox up --foreground),
// with the real controller binary: the cluster starts, the sample Sandbox
// becomes Ready, and Ctrl-C (SIGINT) stops the controller and every cluster
// process.
func TestMakeRun(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("checks the kwok cluster's own processes; not applicable with E2E_CLUSTER=kind")
	}
	bin := buildCLI(t)
	workdir, err := os.MkdirTemp("", "agent-sandbox-run-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()

	cmd := exec.Command(filepath.Join(bin, "kubectl-sandbox"), "up", "--foreground", "--name", "run", "--workdir", workdir,
		"--nodes", "1", "--bin-dir", tests.BinDir(), "--controller", controller, "--runtime", runtimeBin, "--router", buildRouter(t),
		"--samples", filepath.Join(tests.RepoRoot(), "config", "samples"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	kubeconfig, controllerPID, metricsURL, routerPID, routerURL, routerMetricsURL, e2bExport := "", 0, "", 0, "", "", ""
	lines := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(3*time.Minute, func() { _ = cmd.Process.Kill() })
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		t.Log(line)
		if v, ok := strings.CutPrefix(line, "export KUBECONFIG="); ok {
			kubeconfig = v
		}
		if _, err := fmt.Sscanf(line, "The controller runs as pid %d;", &controllerPID); err == nil {
			continue
		}
		if v, ok := strings.CutPrefix(line, "Its metrics: "); ok {
			metricsURL = v
		}
		_, _ = fmt.Sscanf(line, "The sandbox router runs as pid %d;", &routerPID)
		if v, ok := strings.CutPrefix(line, "router: "); ok {
			routerURL = v
		}
		if v, ok := strings.CutPrefix(line, "router metrics: "); ok {
			routerMetricsURL = v
		}
		if v, ok := strings.CutPrefix(line, "export E2B_API_URL="); ok {
			e2bExport = v
		}
		if strings.HasPrefix(line, "Press Ctrl-C") {
			break
		}
	}
	deadline.Stop()
	if kubeconfig == "" || controllerPID == 0 || metricsURL == "" || routerPID == 0 || routerURL == "" || routerMetricsURL == "" || e2bExport == "" {
		t.Fatalf("kubectl-sandbox up did not report a kubeconfig, a controller pid, a metrics address, the router's pid, URL and metrics and the E2B settings")
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for lines.Scan() {
			t.Log(strings.TrimSpace(lines.Text()))
		}
	}()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Minute, "sample Sandbox Ready",
		readyIs(c, types.NamespacedName{Namespace: "default", Name: "sample-sandbox"}, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	t.Logf("sample Sandbox Ready %s after the cluster was up", took.Round(time.Millisecond))

	// The extension samples: the claim is served (warm or cold, depending
	// on whether the pool was Ready when it arrived) and the pool is full.
	waitFor(t, time.Minute, "sample claim Ready and python-pool full", func() error {
		claim := &extv1beta1.SandboxClaim{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "sample-claim"}, claim); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(claim.Status.Conditions, extv1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
			return fmt.Errorf("claim Ready is %+v", r)
		}
		pool := &extv1beta1.SandboxWarmPool{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "python-pool"}, pool); err != nil {
			return err
		}
		if pool.Status.ReadyReplicas != 2 {
			return fmt.Errorf("pool has %d Ready members", pool.Status.ReadyReplicas)
		}
		return nil
	})

	// The stand-in kubelet runs the sample pool's Pods: kubectl exec, logs
	// and port-forward reach the claimed Sandbox's runtime.
	checkSamplePodReachable(t, c, cfg, kubeconfig, routerURL)
	// The e2b SDK example of docs/sdks.md, with the settings up printed.
	checkE2BHello(t, routerURL, e2bExport)

	// The controller's metrics move with what it does.
	ready := `agent_sandboxes{launch_type="none",namespace="default",owned_by="none",ready_condition="True",sandbox_template="none"}`
	waitFor(t, 30*time.Second, "metrics after Ready", func() error {
		return expectMetrics(metricsURL, map[string]func(float64) bool{
			`agent_sandbox_build_info`: eq(1),
			ready:                      eq(1),
			`agent_sandbox_creation_latency_ms_count{launch_type="none",namespace="default",sandbox_template="none"}`: eq(1),
			`agent_sandbox_apply_total{action="created",kind="Pod"}`:                                                  atLeast(1),
			`agent_sandbox_apply_total{action="created",kind="Service"}`:                                              atLeast(1),
			`agent_sandbox_policies{policy="agent-sandbox-baseline"}`:                                                 eq(1),
			`agent_sandbox_policy_check_seconds_count{kind="Sandbox"}`:                                                atLeast(1),
			`agent_sandbox_render_seconds_count{kind="Sandbox"}`:                                                      atLeast(1),
		})
	})
	setMode(t, c, types.NamespacedName{Namespace: "default", Name: "sample-sandbox"}, sandboxv1beta1.SandboxOperatingModeSuspended)
	waitFor(t, 30*time.Second, "metrics after suspend", func() error {
		return expectMetrics(metricsURL, map[string]func(float64) bool{
			`agent_sandbox_apply_total{action="deleted",kind="Pod"}`:                                                                  eq(1),
			`agent_sandboxes{launch_type="none",namespace="default",owned_by="none",ready_condition="False",sandbox_template="none"}`: eq(1),
			`agent_sandbox_apply_requests_saved_total{kind="Service"}`:                                                                atLeast(1),
		})
	})

	// Every metric the dashboard and the alerts use is served.
	checkDashboardMetrics(t, c, metricsURL, routerMetricsURL, routerURL)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		<-drained // all output read before Wait, as os/exec requires
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kubectl-sandbox up exited with %v after SIGINT", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("kubectl-sandbox up did not stop within a minute of SIGINT")
	}
	if err := syscall.Kill(controllerPID, 0); err == nil {
		t.Errorf("controller pid %d still running", controllerPID)
	}
	if err := syscall.Kill(routerPID, 0); err == nil {
		t.Errorf("sandbox router pid %d still running", routerPID)
	}
	if left := cluster.Processes(filepath.Join(workdir, "clusters", "run")); len(left) > 0 {
		t.Errorf("cluster processes left running: %v", left)
	}
}

// checkSamplePodReachable runs a command in the Pod of the sample claim's
// Sandbox (taken from the sample pool) through kubectl exec and through a
// port-forward, and reads its log with kubectl logs.
func checkSamplePodReachable(t *testing.T, c client.Client, cfg *rest.Config, kubeconfig, routerURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claim := &extv1beta1.SandboxClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "sample-claim"}, claim); err != nil {
		t.Fatal(err)
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: claim.Status.Sandbox.Name}, sb); err != nil {
		t.Fatal(err)
	}
	pod := render.PodName(sb)
	res, err := execute(forward(t, cfg, "default", pod), "echo hi")
	if err != nil || res.Stdout != "hi\n" {
		t.Fatalf("POST /execute through a port-forward to %s: %+v, %v", pod, res, err)
	}
	// The local router reaches it by its Sandbox's name, as docs/sdks.md's
	// SDK example and kubectl sandbox exec --router do.
	rsb, err := sdk.Dial(ctx, "default", sb.Name, sdk.WithRouter(routerURL))
	if err != nil {
		t.Fatalf("SDK through the router %s: %v", routerURL, err)
	}
	if res, err := rsb.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("Run(echo hi) through the router: %+v, %v", res, err)
	}
	_ = rsb.Close(ctx)
	if out, err := kubectl(ctx, kubeconfig, "exec", pod, "--", "sh", "-c", "echo hello > hello.txt; cat hello.txt"); err != nil || out != "hello\n" {
		t.Fatalf("kubectl exec %s: %q, %v", pod, out, err)
	}
	waitFor(t, 30*time.Second, "kubectl logs "+pod, func() error {
		out, err := kubectl(ctx, kubeconfig, "logs", pod)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "msg=execute") {
			return fmt.Errorf("kubectl logs %s = %q", pod, out)
		}
		return nil
	})
}

// buildCLI builds kubectl-sandbox into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-sandbox")
	build.Dir = tests.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-sandbox: %v\n%s", err, out)
	}
	return bin
}

func eq(v float64) func(float64) bool      { return func(x float64) bool { return x == v } }
func atLeast(v float64) func(float64) bool { return func(x float64) bool { return x >= v } }

// expectMetrics scrapes url and checks each series (name{labels} exactly as
// Prometheus' text format prints it) against its predicate.
func expectMetrics(url string, want map[string]func(float64) bool) error {
	got, err := tests.ScrapeMetrics(url)
	if err != nil {
		return err
	}
	for series, v := range got {
		// build_info's labels carry the version: match it by name.
		if j := strings.IndexByte(series, '{'); j > 0 && strings.HasPrefix(series, "agent_sandbox_build_info") {
			got[series[:j]] = v
		}
	}
	var bad []string
	for series, ok := range want {
		if v, found := got[series]; !found || !ok(v) {
			bad = append(bad, fmt.Sprintf("%s = %v (present %v)", series, v, found))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("metrics not as expected: %s", strings.Join(bad, "; "))
	}
	return nil
}
