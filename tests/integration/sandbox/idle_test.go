package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// idleRequests counts, by namespace, the requests of an idle suspend
// manager.
type idleRequests struct {
	mu          sync.Mutex
	byNamespace map[string]int
}

func (r *idleRequests) in(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNamespace[ns]
}

// startIdle runs idle suspend, as the controller does, in a manager of its
// own next to the package's (which runs the Sandbox reconciler) until the
// test ends.
func startIdle(t *testing.T) *idleRequests {
	t.Helper()
	reqs := &idleRequests{byNamespace: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if _, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"); ok {
				ns, _, _ := strings.Cut(rest, "/")
				reqs.mu.Lock()
				reqs.byNamespace[ns]++
				reqs.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Cache: controllers.CacheOptions(controllers.OwnManagers("agent-sandbox-controller")), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	idle := &controllers.IdleReconciler{Recorder: mgr.GetEventRecorder("sandbox-controller")}
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
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("idle suspend manager: caches did not sync")
	}
	return reqs
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func withAnnotations(kv ...string) func(*sandboxv1beta1.Sandbox) {
	return func(sb *sandboxv1beta1.Sandbox) {
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			sb.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// operatingModeManager returns the fields the operating-mode field manager
// owns of a Sandbox by server-side apply ("" when none).
func operatingModeManager(sb *sandboxv1beta1.Sandbox) string {
	for _, m := range sb.ManagedFields {
		if m.Manager == sandboxv1beta1.FieldManagerOperatingMode && m.Operation == metav1.ManagedFieldsOperationApply && m.FieldsV1 != nil {
			return m.FieldsV1.GetRawString()
		}
	}
	return ""
}

func TestIdleSandboxIsSuspended(t *testing.T) {
	startIdle(t)
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	idle := withAnnotations(sandboxv1beta1.AnnotationIdleTimeout, "2s")
	create(t, newSandbox(ns, "idle", idle, withVolume("data")))
	create(t, newSandbox(ns, "plain"))
	// An unclaimed warm member (as the pool labels it) is never suspended,
	// whatever it carries.
	create(t, newSandbox(ns, "member", idle, func(sb *sandboxv1beta1.Sandbox) {
		sb.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "0a1b2c3d"}
	}))
	for _, name := range []string{"idle", "plain", "member"} {
		waitCondition(t, ns, name, sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	}

	var sb *sandboxv1beta1.Sandbox
	envtest.Eventually(t, 15*time.Second, "idle Sandbox suspended", func() error {
		var err error
		if sb, err = get(t, ns, "idle", &sandboxv1beta1.Sandbox{}); err != nil {
			return err
		}
		if sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
			return fmt.Errorf("operatingMode %q", sb.Spec.OperatingMode)
		}
		return nil
	})
	// spec.operatingMode and nothing else, under the operating-mode manager.
	if got, want := operatingModeManager(sb), `{"f:spec":{"f:operatingMode":{}}}`; got != want {
		t.Errorf("%s owns %s, want %s", sandboxv1beta1.FieldManagerOperatingMode, got, want)
	}
	eventually(t, "IdleSuspended event", func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctxFor(t), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == controllers.EventIdleSuspended && e.Regarding.Name == "idle" && e.Type == corev1.EventTypeNormal &&
				strings.HasPrefix(e.Note, "suspended after 2s without traffic") {
				return nil
			}
		}
		return fmt.Errorf("no IdleSuspended event among %d", len(evs.Items))
	})
	// The Sandbox reconciler does the rest: the Pod goes, the PVC stays.
	waitCondition(t, ns, "idle", sandboxv1beta1.ConditionSuspended, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated)
	if _, err := get(t, ns, "data-idle", &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("PVC gone after an idle suspend: %v", err)
	}

	// The others have been Ready for longer than 2s by now.
	time.Sleep(3 * time.Second)
	for _, name := range []string{"plain", "member"} {
		other, err := get(t, ns, name, &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		if other.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended || operatingModeManager(other) != "" {
			t.Errorf("%s was touched: operatingMode %q, managed %q", name, other.Spec.OperatingMode, operatingModeManager(other))
		}
	}
}

// A Sandbox whose traffic is reported (the last-activity annotation, as
// the router and the SDK write it) is not suspended while it is; once the
// reports stop it is. Sandboxes waiting to become idle cost no request.
func TestIdleActivityKeepsSandboxRunning(t *testing.T) {
	reqs := startIdle(t)
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newSandbox(ns, "busy", withAnnotations(sandboxv1beta1.AnnotationIdleTimeout, "3s")))
	create(t, newSandbox(ns, "waiting", withAnnotations(sandboxv1beta1.AnnotationIdleTimeout, "1h")))
	waitCondition(t, ns, "busy", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	waitCondition(t, ns, "waiting", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)

	report := func() {
		t.Helper()
		ac := sandboxac.Sandbox("busy", ns).WithAnnotations(map[string]string{
			sandboxv1beta1.AnnotationLastActivity: time.Now().UTC().Truncate(time.Second).Format(time.RFC3339),
		})
		if err := env.Client.Apply(ctxFor(t), ac, client.FieldOwner(sandboxv1beta1.FieldManagerActivity), client.ForceOwnership); err != nil {
			t.Fatalf("reporting activity: %v", err)
		}
	}
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		report()
		time.Sleep(300 * time.Millisecond)
		sb, err := get(t, ns, "busy", &sandboxv1beta1.Sandbox{})
		if err != nil {
			t.Fatal(err)
		}
		if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
			t.Fatalf("suspended while traffic was reported (last activity %s)", sb.Annotations[sandboxv1beta1.AnnotationLastActivity])
		}
	}
	// Nothing was idle long enough: idle suspend sent nothing here, for
	// the reports nor for the Sandbox waiting for its hour.
	if n := reqs.in(ns); n != 0 {
		t.Errorf("idle suspend sent %d requests in the namespace while nothing was idle, want 0", n)
	}
	envtest.Eventually(t, 15*time.Second, "suspended once reports stopped", func() error {
		sb, err := get(t, ns, "busy", &sandboxv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		if sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
			return fmt.Errorf("operatingMode %q", sb.Spec.OperatingMode)
		}
		return nil
	})
	if sb, _ := get(t, ns, "waiting", &sandboxv1beta1.Sandbox{}); operatingModeManager(sb) != "" {
		t.Errorf("the Sandbox with an hour to go was written: %s", operatingModeManager(sb))
	}
}
