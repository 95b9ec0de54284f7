package runtimeclass

import (
	"fmt"
	"os"
	"testing"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var (
	env     *envtest.Env
	running *manager.Running
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		set, err := policy.LoadConfig(policy.Config{Bundles: policy.DefaultBundles})
		if err != nil {
			return nil, err
		}
		policies := &policy.Holder{}
		policies.Set(set)
		// The controller's defaults: the runtime class resolved from the
		// cluster's RuntimeClasses, of which there are none yet.
		running, err = manager.Start(e.Config, e.Scheme, manager.Options{Extensions: true, Policy: policies, DefaultRuntimeClass: "auto"})
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
