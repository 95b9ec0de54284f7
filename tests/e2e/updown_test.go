package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/localcluster"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestUpDown drives `kubectl-sandbox up` (detached) and `down` as a user
// without make would: up returns with the controller still running and
// serving, a second up refuses, down stops everything, and a second down
// has nothing to do.
func TestUpDown(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("checks the kwok cluster's own processes; not applicable with E2E_CLUSTER=kind")
	}
	cli := filepath.Join(buildCLI(t), "kubectl-sandbox")
	workdir, err := os.MkdirTemp("", "agent-sandbox-updown-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(cli, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl-sandbox %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		return out.String(), code
	}
	common := []string{"--name", "updown", "--workdir", workdir, "--bin-dir", tests.BinDir()}
	defer run(append([]string{"down"}, common...)...)

	// A missing controller binary is refused before anything starts.
	out, code := run(append([]string{"up", "--controller", filepath.Join(workdir, "nope")}, common...)...)
	if code != 1 || !strings.Contains(out, "not an executable file") {
		t.Fatalf("up with a missing controller: exit %d, output %q", code, out)
	}

	out, code = run(append([]string{"up", "--nodes", "1", "--controller", controller, "--runtime", runtimeBin, "--router", buildRouter(t)}, common...)...)
	if code != 0 {
		t.Fatalf("up: exit %d", code)
	}
	upAt := time.Now()
	var kubeconfig, metrics string
	pid, standInPID, routerPID, routerURL := 0, 0, 0, ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "export KUBECONFIG="); ok {
			kubeconfig = v
		}
		if v, ok := strings.CutPrefix(line, "Its metrics: "); ok {
			metrics = v
		}
		_, _ = fmt.Sscanf(line, "The controller runs as pid %d;", &pid)
		_, _ = fmt.Sscanf(line, "The stand-in kubelet runs as pid %d;", &standInPID)
		_, _ = fmt.Sscanf(line, "The sandbox router runs as pid %d;", &routerPID)
		if v, ok := strings.CutPrefix(line, "router: "); ok {
			routerURL = v
		}
	}
	if routerPID == 0 || routerURL == "" {
		t.Fatal("up did not report the sandbox router's pid and URL")
	}
	if kubeconfig == "" || pid == 0 || metrics == "" || standInPID == 0 {
		t.Fatal("up did not report a kubeconfig, a controller pid and its metrics, and a stand-in kubelet pid")
	}
	// up has exited; the controller it started still serves.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("controller pid %d is gone after up returned: %v", pid, err)
	}
	// Everything up started, the webhook included, listens on loopback only.
	upCluster, err := localcluster.Open(workdir, "updown", tests.BinDir())
	if err != nil {
		t.Fatal(err)
	}
	socks, err := cluster.Listening(upCluster, pid, routerPID)
	if err != nil {
		t.Fatal(err)
	}
	assertLoopback(t, socks, "etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok-controller", "sandbox-control", "kubectl-sandbox", "sandbox-router")
	if resp, err := http.Get(routerURL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/healthz after up returned: %v, %v", routerURL, resp, err)
	} else {
		_ = resp.Body.Close()
	}
	resp, err := http.Get(metrics)
	if err != nil {
		t.Fatalf("controller metrics after up returned: %v", err)
	}
	_ = resp.Body.Close()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Right after up, garbage collection already knows our kinds.
	claimCollectedAtOnce(t, c, upAt)
	sb := sandbox("default", "updown")
	if err := c.Create(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Sandbox Ready on the cluster up started", readyIs(c, client.ObjectKeyFromObject(sb), metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))

	// The cluster is up: a second up refuses and changes nothing.
	out, code = run(append([]string{"up", "--nodes", "1", "--controller", controller}, common...)...)
	if code != 1 || !strings.Contains(out, "already running") {
		t.Fatalf("second up: exit %d, output %q", code, out)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the second up stopped the controller: %v", err)
	}

	out, code = run(append([]string{"down"}, common...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("stopping the controller (pid %d)", pid)) {
		t.Fatalf("down: exit %d, output %q", code, out)
	}
	if left := cluster.Processes(filepath.Join(workdir, "clusters", "updown")); len(left) > 0 {
		t.Errorf("cluster processes left after down: %v", left)
	}
	// The detached controller's parent is gone, so it may linger as a
	// zombie nobody reaps: Alive does not count those.
	if localcluster.Alive(pid, "") {
		t.Errorf("controller pid %d still running after down", pid)
	}
	if localcluster.Alive(routerPID, "") {
		t.Errorf("sandbox router pid %d still running after down", routerPID)
	}
	if localcluster.Alive(standInPID, "") {
		t.Errorf("stand-in kubelet pid %d still running after down", standInPID)
	}
	out, code = run(append([]string{"down"}, common...)...)
	if code != 0 || !strings.Contains(out, "nothing to stop") {
		t.Fatalf("second down: exit %d, output %q", code, out)
	}
}
