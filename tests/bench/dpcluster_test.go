package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// dataplaneCluster is a local cluster that runs sandboxes: the stand-in
// kubelet (a sandbox-runtime per sandbox Pod), the controller and the
// router.
type dataplaneCluster struct {
	local      *cluster.Cluster
	runtimeBin string
	routerURL  string
}

// startDataplaneCluster starts one, named name with nodes fake nodes, the
// router with routerArgs added to its flags; it is stopped (router,
// controller, stand-in, then the cluster) when the test ends.
func startDataplaneCluster(t *testing.T, name string, nodes int, routerArgs ...string) *dataplaneCluster {
	t.Helper()
	local, _ := startBenchCluster(t, name, nodes)
	workdir := local.Workdir
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
	benchStandIn = standIn
	t.Cleanup(func() { benchStandIn = nil })
	ctrl := startController(t, local.Kubeconfig)
	t.Cleanup(func() { ctrl.stop(t) })
	routerURL, stopRouter := startRouter(t, local.Kubeconfig, routerArgs...)
	t.Cleanup(stopRouter)
	return &dataplaneCluster{local: local, runtimeBin: runtimeBin, routerURL: routerURL}
}

// benchStandIn is the running data plane cluster's stand-in kubelet: a
// pool member counts as ready (waitPool) once it also has its runtime.
var benchStandIn *cluster.StandIn

// newWatch is the bench's own cache of ns ("" for every namespace) with
// informers for objs; start it with startWatch once every informer and
// handler is registered.
func newWatch(t *testing.T, cfg *rest.Config, ns string, objs ...client.Object) cache.Cache {
	t.Helper()
	o := cache.Options{Scheme: envtest.Scheme()}
	if ns != "" {
		o.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	watched, err := cache.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if _, err := watched.GetInformer(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return watched
}

// startWatch starts watched until the test ends and waits for it to sync.
func startWatch(t *testing.T, watched cache.Cache) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = watched.Start(ctx) }()
	if !watched.WaitForCacheSync(ctx) {
		t.Fatal("bench informers did not sync")
	}
}

// sdkClient is the Go SDK's Client for the cluster cfg reaches, built as a
// program gets it from a kubeconfig: with no rate limits chosen (QPS and
// Burst 0; the cluster's own config turns client-go's limiter off).
func sdkClient(t *testing.T, cfg *rest.Config, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	user := rest.CopyConfig(cfg)
	user.QPS, user.Burst = 0, 0
	sc, err := sdk.New(user, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}
