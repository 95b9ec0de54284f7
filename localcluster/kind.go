package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// kindHandler is the container runtime handler of kind's nodes: RuntimeClasses
// created on kind use it, so Pods that ask for gvisor or kata still run there.
const kindHandler = "runc"

// DockerAvailable explains why kind cannot run here, or returns nil.
func DockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("a kind cluster needs Docker, and no docker command was found: install Docker, or use the local kwok cluster (the default)")
	}
	out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("a kind cluster needs a running Docker engine, and `docker info` failed (%w: %s): start Docker, or use the local kwok cluster (the default)",
			err, strings.TrimSpace(string(out)))
	}
	return nil
}

func startKind(ctx context.Context, opts Options) (*Cluster, error) {
	if err := DockerAvailable(); err != nil {
		return nil, err
	}
	provider := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	c := &Cluster{Name: opts.Name, Workdir: opts.Workdir, Kubeconfig: filepath.Join(opts.Workdir, opts.Name+"-kind.kubeconfig"), kind: provider, log: opts.Log}
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
