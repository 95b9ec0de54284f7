package helm

import (
	"context"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// config is a Helm action configuration for a kubeconfig and namespace,
// releases stored as Secrets (Helm's default).
func config(kubeconfig, namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return cfg, nil
}

// Install is `helm install agent-sandbox charts/agent-sandbox
// --namespace <namespace> --create-namespace` with values, on the cluster
// of kubeconfig, waiting for nothing (the caller checks what it needs).
func Install(ctx context.Context, kubeconfig, namespace string, values map[string]any) (*release.Release, error) {
	cfg, err := config(kubeconfig, namespace)
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = ReleaseName
	inst.Namespace = namespace
	inst.CreateNamespace = true
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = 2 * time.Minute
	r, err := inst.RunWithContext(ctx, ch, values)
	if err != nil {
		return nil, fmt.Errorf("helm install: %w", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm install: unexpected release type %T", r)
	}
	return rel, nil
}

// Uninstall is `helm uninstall agent-sandbox --namespace <namespace>`.
func Uninstall(kubeconfig, namespace string) error {
	cfg, err := config(kubeconfig, namespace)
	if err != nil {
		return err
	}
	u := action.NewUninstall(cfg)
	u.WaitStrategy = kube.HookOnlyStrategy
	if _, err := u.Run(ReleaseName); err != nil {
		return fmt.Errorf("helm uninstall: %w", err)
	}
	return nil
}
