package policy

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var (
	env      *envtest.Env
	running  *manager.Running
	policies = &policy.Holder{}
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		// As the controller runs: every bundle loaded, the defaults
		// enforced, a namespace's labels choosing its modes.
		set, err := policy.LoadConfig(policy.Config{Modes: policy.DefaultModes()})
		if err != nil {
			return nil, err
		}
		policies.Set(set)
		policies.NamespaceLabels = controllers.NamespaceLabels(e.Client)
		policies.Exempt = []string{"kube-system"}
		// The API server's RuntimeClass admission wants the class to exist.
		if err := e.EnsureGVisor(context.Background()); err != nil {
			return nil, err
		}
		running, err = manager.Start(e.Config, e.Scheme, manager.Options{
			Extensions: true, Policy: policies,
			// Pods get gVisor when their template names no runtime class
			// (the cluster's isolating class).
			Defaults: render.Defaults{RuntimeClassName: "gvisor"},
		})
		if err != nil {
			return nil, err
		}
		return func() {
			if err := running.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}, nil
	})
}
