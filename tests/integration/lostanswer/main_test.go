package lostanswer

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var (
	env     *envtest.Env
	running *manager.Running
	faults  = &injector{}
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		cfg := rest.CopyConfig(e.Config)
		cfg.Wrap(faults.wrap)
		var err error
		if running, err = manager.Start(cfg, e.Scheme, manager.Options{Extensions: true}); err != nil {
			return nil, err
		}
		return func() {
			if err := running.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}, nil
	})
}
