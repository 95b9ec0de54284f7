package client

import (
	"fmt"
	"os"
	"testing"

	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		running, err := manager.Start(e.Config, e.Scheme, manager.Options{Extensions: true})
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
