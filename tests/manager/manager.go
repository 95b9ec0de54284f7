package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// Field managers the tests run the controller with.
const (
	FieldManager  = "agent-sandbox-controller"
	StatusManager = "agent-sandbox-controller-status"
)

// Running is a started manager.
type Running struct {
	Sandbox *controllers.SandboxReconciler
	Engine  *ssa.Engine
	// Defaults are the defaults every controller renders with.
	Defaults render.DefaultsSource
	// Extensions are the extension controllers, with Options.Extensions.
	Extensions *controllers.Extensions

	mu          sync.Mutex
	requests    map[string]int64 // by HTTP verb
	byNamespace map[string]int64 // by namespace in the request path
	byPath      map[string]int64 // by "METHOD path"
	cancel      context.CancelFunc
	done        chan error
}

// Requests returns the number of HTTP requests the manager's clients sent.
func (r *Running) Requests() int64 {
	var n int64
	for _, v := range r.RequestsByVerb() {
		n += v
	}
	return n
}

// RequestsByVerb returns the requests sent, by HTTP method.
func (r *Running) RequestsByVerb() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.requests)
}

// RequestsIn returns the number of requests the manager's clients sent for
// objects in one namespace.
func (r *Running) RequestsIn(namespace string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNamespace[namespace]
}

// RequestsTo returns the number of requests the manager's clients sent with
// an HTTP method to a path relative to the namespace, as
// "sandboxclaims/my-claim" or "sandboxclaims/my-claim/status".
func (r *Running) RequestsTo(method, namespace, path string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for k, v := range r.byPath {
		if strings.HasSuffix(k, "/namespaces/"+namespace+"/"+path) && strings.HasPrefix(k, method+" ") {
			n += v
		}
	}
	return n
}

// Options of a test manager.
type Options struct {
	// SandboxWorkers is the number of concurrent Sandbox reconciles (default 8).
	SandboxWorkers int
	// Extensions also runs the SandboxTemplate, SandboxWarmPool and
	// SandboxClaim controllers.
	Extensions bool
	// Policy, when set, is enforced by every controller.
	Policy *policy.Holder
	// Defaults are what Pods get where their template leaves a field unset
	// (every controller renders with them).
	Defaults render.DefaultsSource
	// DefaultRuntimeClass, when set, is the controller's
	// --default-runtime-class (auto, none or a name), resolved from the
	// manager's cache as the controller does; it replaces Defaults.
	DefaultRuntimeClass string
	// Tracer, when set, traces claim reconciles as the controller does with
	// tracing on: its API calls go through tracing.Transport.
	Tracer trace.TracerProvider
}

// Start starts a manager with the reconcilers against cfg and waits for its
// caches to sync.
func Start(cfg *rest.Config, scheme *runtime.Scheme, opts ...Options) (*Running, error) {
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.SandboxWorkers <= 0 {
		o.SandboxWorkers = 8
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	r := &Running{done: make(chan error, 1), requests: map[string]int64{}, byNamespace: map[string]int64{}, byPath: map[string]int64{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			r.mu.Lock()
			r.requests[req.Method]++
			r.byPath[req.Method+" "+req.URL.Path]++
			if _, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"); ok {
				ns, _, _ := strings.Cut(rest, "/")
				r.byNamespace[ns]++
			}
			r.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	if o.Tracer != nil {
		cfg.Wrap(tracing.Transport)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   controllers.CacheOptions(controllers.OwnManagers(FieldManager)),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests may start a manager again in the same process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	r.Engine = ssa.New(mgr.GetClient(), FieldManager, StatusManager)
	r.Engine.ReadWith(mgr.GetAPIReader())
	r.Defaults = o.Defaults
	if o.DefaultRuntimeClass != "" {
		src := runtimeclass.New(o.DefaultRuntimeClass, policy.IsolatingRuntimeClasses(), mgr.GetCache(), ctrl.Log.WithName("runtime-class"))
		if err := src.Watch(context.Background(), mgr.GetCache()); err != nil {
			return nil, err
		}
		r.Defaults = src
	}
	r.Sandbox = &controllers.SandboxReconciler{
		Client: mgr.GetClient(), Engine: r.Engine, Recorder: mgr.GetEventRecorder("sandbox-controller"), Policy: o.Policy,
		Defaults: r.Defaults, ControllerNamespace: "agent-sandbox-system", Templates: o.Extensions,
	}
	if err := r.Sandbox.SetupWithManager(mgr, o.SandboxWorkers); err != nil {
		return nil, err
	}
	if o.Extensions {
		r.Extensions, err = controllers.SetupExtensions(mgr, controllers.ExtensionsOptions{
			Engine: r.Engine, ControllerNamespace: "agent-sandbox-system",
			TemplateWorkers: 2, WarmPoolWorkers: 2, ClaimWorkers: 16, WarmPoolMaxBatch: 300,
			Policy: o.Policy, Defaults: r.Defaults, Tracer: o.Tracer, Sandboxes: r.Sandbox,
		})
		if err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(fmt.Errorf("manager caches did not sync"), <-r.done)
	}
	return r, nil
}

// Stop stops the manager and waits for it.
func (r *Running) Stop() error {
	r.cancel()
	return <-r.done
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
