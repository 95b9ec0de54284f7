package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// idleFixture is an IdleReconciler over a fake client that records the
// applies sent (and answers them with applyErr).
type idleFixture struct {
	r        *IdleReconciler
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
	applies  []string
	opts     []client.ApplyOptions
	applyErr error
}

func newIdleFixture(t *testing.T, sb *sandboxv1beta1.Sandbox) *idleFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sandboxv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	f := &idleFixture{clock: clocktesting.NewFakeClock(sb.CreationTimestamp.Add(time.Second)), recorder: events.NewFakeRecorder(10)}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sb).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			b, err := json.Marshal(obj)
			if err != nil {
				return err
			}
			f.applies = append(f.applies, string(b))
			f.opts = append(f.opts, *(&client.ApplyOptions{}).ApplyOptions(opts))
			return f.applyErr
		},
	}).Build()
	f.r = &IdleReconciler{Client: c, Engine: ssa.New(c, sandboxv1beta1.FieldManagerOperatingMode, ""),
		Recorder: f.recorder, Clock: f.clock}
	return f
}

func (f *idleFixture) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "sb"}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (f *idleFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func idleSandbox(annotations map[string]string) *sandboxv1beta1.Sandbox {
	created := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", UID: "sb-uid",
		CreationTimestamp: created, Annotations: annotations}}
	sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: sandboxv1beta1.ReasonDependenciesReady, LastTransitionTime: created}}
	return sb
}

func TestIdleReconcilerWaitsThenSuspends(t *testing.T) {
	f := newIdleFixture(t, idleSandbox(map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m"}))
	if res := f.reconcile(t); res.RequeueAfter != 59*time.Second {
		t.Errorf("not idle yet: requeue after %s, want 59s", res.RequeueAfter)
	}
	if len(f.applies) != 0 || len(f.events()) != 0 {
		t.Fatalf("not idle yet, but applied %v", f.applies)
	}

	before := testutil.ToFloat64(metrics.IdleSuspends)
	f.clock.Step(time.Minute)
	if res := f.reconcile(t); res.RequeueAfter != 0 {
		t.Errorf("suspended: requeue after %s, want none", res.RequeueAfter)
	}
	if len(f.applies) != 1 {
		t.Fatalf("applies %v, want one", f.applies)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(f.applies[0]), &got); err != nil {
		t.Fatal(err)
	}
	// spec.operatingMode and nothing else, guarded by uid and
	// resourceVersion.
	want := map[string]any{
		"apiVersion": sandboxv1beta1.GroupVersion.String(), "kind": "Sandbox",
		"metadata": map[string]any{"name": "sb", "namespace": "ns", "uid": "sb-uid", "resourceVersion": "999"},
		"spec":     map[string]any{"operatingMode": "Suspended"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("apply (-want +got):\n%s", diff)
	}
	if o := f.opts[0]; o.FieldManager != sandboxv1beta1.FieldManagerOperatingMode || o.Force == nil || !*o.Force {
		t.Errorf("applied as %q, force %v; want %q, forced", o.FieldManager, o.Force, sandboxv1beta1.FieldManagerOperatingMode)
	}
	evs := f.events()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal IdleSuspended suspended after 1m without traffic") {
		t.Errorf("events %q, want one IdleSuspended", evs)
	}
	if n := testutil.ToFloat64(metrics.IdleSuspends) - before; n != 1 {
		t.Errorf("agent_sandbox_idle_suspends_total grew by %v, want 1", n)
	}
}

// A Sandbox that changed since the cache showed it is not suspended: the
// apply fails its resourceVersion precondition, nothing is reported, and
// the decision is made again.
func TestIdleReconcilerConflictDecidesAgain(t *testing.T) {
	f := newIdleFixture(t, idleSandbox(map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m"}))
	f.clock.Step(time.Hour)
	f.applyErr = apierrors.NewConflict(schema.GroupResource{Group: sandboxv1beta1.GroupName, Resource: "sandboxes"}, "sb", nil)
	before := testutil.ToFloat64(metrics.IdleSuspends)
	if res := f.reconcile(t); res.RequeueAfter <= 0 {
		t.Errorf("a conflict is not retried (requeue after %s)", res.RequeueAfter)
	}
	if evs := f.events(); len(evs) != 0 {
		t.Errorf("events after a conflict: %q", evs)
	}
	if testutil.ToFloat64(metrics.IdleSuspends) != before {
		t.Error("a conflict was counted as a suspend")
	}
}

func TestIdleReconcilerWarnsOncePerInvalidValue(t *testing.T) {
	sb := idleSandbox(map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "soon"})
	f := newIdleFixture(t, sb)
	f.clock.Step(time.Hour)
	for range 3 {
		// Terminal until the annotation changes: no error, no retry.
		if res := f.reconcile(t); !res.IsZero() {
			t.Errorf("an invalid annotation is retried: %+v", res)
		}
	}
	evs := f.events()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning InvalidResumeAnnotation annotation "+sandboxv1beta1.AnnotationIdleTimeout) {
		t.Errorf("events %q, want one InvalidResumeAnnotation", evs)
	}
	if len(f.applies) != 0 {
		t.Errorf("an invalid annotation suspended: %v", f.applies)
	}
}

func TestHasIdleTimeout(t *testing.T) {
	with := idleSandbox(map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m"})
	without := idleSandbox(map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"})
	if !hasIdleTimeout.Create(event.CreateEvent{Object: with}) || hasIdleTimeout.Create(event.CreateEvent{Object: without}) {
		t.Error("create events: only Sandboxes with the annotation pass")
	}
	if !hasIdleTimeout.Update(event.UpdateEvent{ObjectOld: without, ObjectNew: with}) ||
		hasIdleTimeout.Update(event.UpdateEvent{ObjectOld: with, ObjectNew: without}) {
		t.Error("update events: only Sandboxes with the annotation after the update pass")
	}
}
