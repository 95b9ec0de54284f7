package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestMakeRun runs what `make run` runs, with the real controller binary:
// the cluster starts, the sample Sandbox becomes Ready, and Ctrl-C (SIGINT)
// stops the controller and every cluster process.
func TestMakeRun(t *testing.T) {
	bin := t.TempDir()
	for _, pkg := range []string{"./cmd/sandbox-controller", "./tests/cmd/localcluster"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir = tests.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	workdir, err := os.MkdirTemp("", "agent-sandbox-run-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()

	cmd := exec.Command(filepath.Join(bin, "localcluster"), "--name", "run", "--workdir", workdir, "--nodes", "1",
		"--controller", filepath.Join(bin, "sandbox-controller"), "--samples", filepath.Join(tests.RepoRoot(), "config", "samples"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	kubeconfig, controllerPID := "", 0
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
		if strings.HasPrefix(line, "Press Ctrl-C") {
			break
		}
	}
	deadline.Stop()
	if kubeconfig == "" || controllerPID == 0 {
		t.Fatalf("localcluster did not report a kubeconfig and a controller pid")
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
			t.Fatalf("localcluster exited with %v after SIGINT", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("localcluster did not stop within a minute of SIGINT")
	}
	if err := syscall.Kill(controllerPID, 0); err == nil {
		t.Errorf("controller pid %d still running", controllerPID)
	}
	if left := cluster.Processes(filepath.Join(workdir, "clusters", "run")); len(left) > 0 {
		t.Errorf("cluster processes left running: %v", left)
	}
}
