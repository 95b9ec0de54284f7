package sandbox

import (
	"fmt"
	"os"
	"testing"

	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var (
	env        *envtest.Env
	running    *manager.Running
	reconciler *controllers.SandboxReconciler
	engine     *ssa.Engine
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		var err error
		if running, err = manager.Start(e.Config, e.Scheme); err != nil {
			return nil, err
		}
		reconciler, engine = running.Sandbox, running.Engine
		return func() {
			if err := running.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}, nil
	})
}
