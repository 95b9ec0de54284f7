package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// dataplaneCluster is a local cluster that runs sandboxes: the stand-in
// kubelet (a sandbox-runtime per sandbox Pod), the controller and the
// router.
type dataplaneCluster struct {
	local      *cluster.Cluster
	runtimeBin string
	routerURL  string
}

// startDataplaneCluster starts one, named name with nodes fake nodes; it is
// stopped (router, controller, stand-in, then the cluster) when the test
// ends.
func startDataplaneCluster(t *testing.T, name string, nodes int) *dataplaneCluster {
	t.Helper()
	workdir, err := os.MkdirTemp("", "agent-sandbox-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(workdir) })
	local, err := cluster.Start(context.Background(), cluster.Options{
		Name: name, Workdir: workdir, Nodes: nodes, InstallCRDs: true, RuntimeClasses: []string{"gvisor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := local.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	clusterDirOf = filepath.Join(local.Workdir, "clusters", local.Name)
	runtimeBin, err := tests.BuildRuntime(workdir)
	if err != nil {
		t.Fatal(err)
	}
	standInLog, err := os.Create(filepath.Join(workdir, "standin.log"))
	if err != nil {
		t.Fatal(err)
	}
	standIn, err := cluster.StartStandIn(local, runtimeBin, slog.New(slog.NewTextHandler(standInLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := standIn.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctrl := startController(t, local.Kubeconfig)
	t.Cleanup(func() { ctrl.stop(t) })
	routerURL, stopRouter := startRouter(t, local.Kubeconfig)
	t.Cleanup(stopRouter)
	return &dataplaneCluster{local: local, runtimeBin: runtimeBin, routerURL: routerURL}
}
