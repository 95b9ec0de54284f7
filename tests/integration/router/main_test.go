package router

import (
	"testing"

	"github.com/agentsandbox/reconciler/tests/envtest"
)

var env *envtest.Env

func TestMain(m *testing.M) { envtest.Main(m, &env) }
