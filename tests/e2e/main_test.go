package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// local is the package's shared cluster with the controller running against it.
var (
	local   *cluster.Cluster
	running *manager.Running
)

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
	defer func() { _ = os.RemoveAll(workdir) }()
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
	running, err = manager.Start(local.Config, envtest.Scheme(), manager.Options{Extensions: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the controller:", err)
		return 1
	}
	code := m.Run()
	if err := running.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: controller:", err)
		code = 1
	}
	return code
}
