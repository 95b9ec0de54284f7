package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

var (
	env        *envtest.Env
	reconciler *controllers.SandboxReconciler
	engine     *ssa.Engine
	// requests counts every HTTP request the controller's clients send.
	requests atomic.Int64
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, startManager)
}

func startManager(e *envtest.Env) (func(), error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	cfg := rest.CopyConfig(e.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  e.Scheme,
		Cache:   controllers.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, err
	}
	engine = ssa.New(mgr.GetClient(), "agent-sandbox-controller", "agent-sandbox-controller-status")
	reconciler = &controllers.SandboxReconciler{
		Client: mgr.GetClient(), Engine: engine, Recorder: mgr.GetEventRecorder("sandbox-controller"),
	}
	if err := reconciler.SetupWithManager(mgr, 4); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("cache did not sync")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
