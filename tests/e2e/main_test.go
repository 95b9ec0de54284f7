package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// local is the package's shared cluster; running is the controller binary
// (built from this tree, default flags plus --extensions) working on it.
var (
	local      *cluster.Cluster
	running    *tests.Controller
	controller string // path of the built binary
)

// startController starts the package's controller binary, acting as its
// ServiceAccount with exactly the deploy RBAC.
func startController(workdir string) (*tests.Controller, error) {
	kubeconfig, err := controllerKubeconfig(workdir)
	if err != nil {
		return nil, err
	}
	return tests.StartController(controller, kubeconfig, filepath.Join(workdir, fmt.Sprintf("controller-%d.log", time.Now().UnixNano())),
		"--leader-elect=false", "--extensions", "--enable-webhook=false")
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workdir, err := os.MkdirTemp("", "agent-sandbox-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if os.Getenv("E2E_KEEP_WORKDIR") == "" {
			_ = os.RemoveAll(workdir)
		}
	}()
	local, err = cluster.Start(ctx, cluster.Options{
		Name: "e2e", Workdir: workdir, Nodes: 3, InstallCRDs: true, RuntimeClasses: []string{"gvisor", "kata"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the local cluster:", err)
		return 1
	}
	defer func() {
		if err := local.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the local cluster:", err)
		}
	}()
	if controller, err = tests.BuildController(workdir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	e2eWorkdir = workdir
	admin, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := installDeployRBAC(admin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	running, err = startController(workdir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the controller:", err)
		return 1
	}
	// The stand-in kubelet, as make run runs it: a sandbox-runtime process
	// per sandbox Pod, reachable through port-forward, exec and logs (kind
	// runs Pods for real).
	if !cluster.UseKind() {
		if standIn, err = startStandIn(workdir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: starting the stand-in kubelet:", err)
			_ = running.Stop()
			return 1
		}
	}
	code := m.Run()
	if standIn != nil {
		if err := standIn.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stand-in kubelet:", err)
			code = 1
		}
	}
	if err := running.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: controller:", err)
		code = 1
	}
	return code
}

// standIn is the package's stand-in kubelet; runtimeBin the sandbox-runtime
// it runs.
var (
	standIn    *cluster.StandIn
	runtimeBin string
)

func startStandIn(workdir string) (*cluster.StandIn, error) {
	var err error
	if runtimeBin, err = tests.BuildRuntime(workdir); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(workdir, "standin.log"))
	if err != nil {
		return nil, err
	}
	return cluster.StartStandIn(local, runtimeBin, slog.New(slog.NewTextHandler(log, nil)))
}

// e2eWorkdir holds the package's binaries and logs.
var e2eWorkdir string
