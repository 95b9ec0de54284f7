package cluster

import (
	"context"
	"os"

	"github.com/agentsandbox/reconciler/localcluster"
	"github.com/agentsandbox/reconciler/tests"
)

// Options configure a local cluster (see localcluster.Options).
type Options = localcluster.Options

// Cluster is a running local cluster.
type Cluster = localcluster.Cluster

// EnvCluster selects the kind of local cluster: "kind" for a kind cluster
// (Docker needed), anything else for the kwok cluster built from bin/.
const EnvCluster = "E2E_CLUSTER"

// UseKind reports whether E2E_CLUSTER=kind is set.
func UseKind() bool { return os.Getenv(EnvCluster) == "kind" }

// Start starts the cluster the product's `kubectl sandbox up` starts, from
// the binaries in tests.BinDir(), or a kind cluster with E2E_CLUSTER=kind.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.BinDir == "" {
		opts.BinDir = tests.BinDir()
	}
	opts.Kind = opts.Kind || UseKind()
	return localcluster.Start(ctx, opts)
}

// Processes returns the PIDs of processes whose command line mentions dir.
func Processes(dir string) []int { return localcluster.Processes(dir) }

// InstallLocalWebhook installs the webhook configuration pointed at
// https://127.0.0.1:port (see localcluster.InstallLocalWebhook).
var InstallLocalWebhook = localcluster.InstallLocalWebhook

// InstallLocalConversion points the CRDs' conversion at
// https://127.0.0.1:port/convert (see localcluster.InstallLocalConversion).
var InstallLocalConversion = localcluster.InstallLocalConversion

// RetryPortTaken starts again, up to three times, a start whose port was
// taken before its process listened (see localcluster.RetryPortTaken).
func RetryPortTaken(start func() (*localcluster.Controller, error)) (*localcluster.Controller, error) {
	return localcluster.RetryPortTaken(start)
}
