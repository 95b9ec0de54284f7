package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// EnvCluster selects the kind of local cluster: "kind" for a kind cluster
// (Docker needed), anything else for the kwok cluster built from bin/.
const EnvCluster = "E2E_CLUSTER"

// UseKind reports whether E2E_CLUSTER=kind is set.
func UseKind() bool { return os.Getenv(EnvCluster) == "kind" }

// kindHandler is the container runtime handler of kind's nodes: RuntimeClasses
// created on kind use it, so Pods that ask for gvisor or kata still run there.
const kindHandler = "runc"

// DockerAvailable explains why kind cannot run here, or returns nil.
func DockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("%s=kind needs Docker, and no docker command was found: install Docker or unset %s to use the local kwok cluster", EnvCluster, EnvCluster)
	}
	out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s=kind needs a running Docker engine, and `docker info` failed (%w: %s): start Docker or unset %s to use the local kwok cluster",
			EnvCluster, err, strings.TrimSpace(string(out)), EnvCluster)
	}
	return nil
}

func startKind(ctx context.Context, opts Options) (*Cluster, error) {
	if err := DockerAvailable(); err != nil {
		return nil, err
	}
	workdir, err := filepath.Abs(opts.Workdir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return nil, err
	}
	provider := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	c := &Cluster{Name: opts.Name, Workdir: workdir, Kubeconfig: filepath.Join(workdir, opts.Name+"-kind.kubeconfig"), kind: provider, log: opts.Log}
	if err := provider.Create(opts.Name, kindcluster.CreateWithWaitForReady(3*time.Minute),
		kindcluster.CreateWithKubeconfigPath(c.Kubeconfig)); err != nil {
		return nil, fmt.Errorf("creating kind cluster %q: %w", opts.Name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	cfg.QPS, cfg.Burst = -1, 0
	c.Config = cfg
	if err := c.install(ctx, opts, kindHandler); err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	return c, nil
}
