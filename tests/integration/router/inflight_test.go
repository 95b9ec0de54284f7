package router

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// slowBackend answers every request after hold.
func slowBackend(t *testing.T, hold time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// runIdleSuspend runs the controller's idle suspend in a manager of its own
// until the test ends.
func runIdleSuspend(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: controllers.CacheOptions(controllers.OwnManagers("agent-sandbox-controller")),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	idle := &controllers.IdleReconciler{Recorder: events.NewFakeRecorder(100)}
	if err := idle.SetupWithManager(mgr, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("idle suspend manager: %v", err)
		}
	})
}

// TestInFlightRequestKeepsSandboxRunning: a request through the router
// that lasts three idle timeouts (4s, reports every 1.33s, the router's
// production flush tick of 1s) is activity for as long as it is open, even
// when the API server takes 3.5s to take each activity write after the
// first (as under load): idle suspend never suspends the Sandbox (which
// would delete its Pod) while it is in flight, and does once it has ended
// and the timeout has passed.
func TestInFlightRequestKeepsSandboxRunning(t *testing.T) {
	ns := env.Namespace(t)
	port := slowBackend(t, 12*time.Second)
	sb := createSandbox(t, ns, "long", nil, nil, map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "4s"})
	createPod(t, sb, "long", "127.0.0.1")
	identity := routerIdentity(t, ns)
	writer, withResume := resumeOptions(t, identity)
	var writes atomic.Int32
	slowWrite := func(ctx context.Context, k resume.Key, at time.Time) error {
		if writes.Add(1) > 1 {
			select {
			case <-time.After(3500 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return writer.ReportActivity(ctx, k, at)
	}
	reporter := router.NewActivityReporter(slowWrite, nil, testr.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan struct{})
	go func() { reporter.Run(ctx, time.Second); close(reported) }()
	t.Cleanup(func() { cancel(); <-reported })
	url, _ := startRouter(t, identity, router.CacheOptions{}, func(o *router.Options) {
		withResume(o)
		o.Activity, o.ActivityInterval = reporter, 30*time.Second
	})
	runIdleSuspend(t)
	// Ready now: idle from this moment, and the request follows at once.
	sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "DependenciesReady", Message: "Pod is Ready", LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctxFor(t), sb); err != nil {
		t.Fatal(err)
	}

	result := make(chan int, 1)
	started := time.Now()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, url+"/long/command", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"X-Sandbox-ID": "long", "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port} {
		req.Header.Set(k, v)
	}
	go func() {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			result <- 0
			return
		}
		_ = resp.Body.Close()
		result <- resp.StatusCode
	}()
	var code int
	for done := false; !done; {
		select {
		case code = <-result:
			done = true
		case <-time.After(100 * time.Millisecond):
		}
		if m := getSandbox(t, ns, "long").Spec.OperatingMode; m == sandboxv1beta1.SandboxOperatingModeSuspended {
			t.Fatalf("suspended %s into a request still in flight", time.Since(started).Round(time.Millisecond))
		}
	}
	if code != http.StatusOK {
		t.Fatalf("the long request answered %d", code)
	}
	// Idle suspend was there all along: once the request is over, the
	// Sandbox is suspended after its timeout.
	waitUntil(t, 30*time.Second, "the idle Sandbox is suspended after the request", func() bool {
		return getSandbox(t, ns, "long").Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended
	})
}
