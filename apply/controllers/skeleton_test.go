package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// skeletonFixture runs a skeleton over ConfigMaps in a fake cache,
// recording what it forgot and what its body saw.
type skeletonFixture struct {
	s       skeleton[*corev1.ConfigMap]
	reader  client.Reader
	forgot  []string // "name" when gone, "name (deleting)" when going
	ran     []string
	outcome func() (reconcile.Result, error)
}

func newSkeletonFixture(t *testing.T, objs ...client.Object) *skeletonFixture {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	return &skeletonFixture{reader: c, outcome: func() (reconcile.Result, error) { return reconcile.Result{}, nil }}
}

func (f *skeletonFixture) run(t *testing.T, name string, deletion onDeletion) (reconcile.Result, error) {
	t.Helper()
	return f.s.run(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}},
		objectKind[*corev1.ConfigMap]{
			controller: "skeleton-test", reader: f.reader, deletion: deletion,
			object: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
			forget: func(key types.NamespacedName, obj *corev1.ConfigMap) {
				if obj == nil {
					f.forgot = append(f.forgot, key.Name)
					return
				}
				f.forgot = append(f.forgot, obj.Name+" (deleting)")
			},
			body: func(_ context.Context, obj *corev1.ConfigMap) (reconcile.Result, error) {
				f.ran = append(f.ran, obj.Name)
				return f.outcome()
			},
		})
}

func configMap(ns, name string, deleting bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")}}
	if deleting {
		cm.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		cm.Finalizers = []string{"test/hold"}
	}
	return cm
}

func namespace(name string, deleting bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if deleting {
		ns.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		ns.Finalizers = []string{"test/hold"}
	}
	return ns
}

func TestSkeletonForgetsWhatIsGone(t *testing.T) {
	f := newSkeletonFixture(t, namespace("ns", false))
	for _, d := range []onDeletion{forgetDeleting, skipDeleting, runDeleting} {
		f.forgot, f.ran = nil, nil
		res, err := f.run(t, "gone", d)
		if err != nil || !res.IsZero() {
			t.Errorf("deletion %d: not found gave %+v, %v; want nothing", d, res, err)
		}
		if len(f.forgot) != 1 || f.forgot[0] != "gone" || len(f.ran) != 0 {
			t.Errorf("deletion %d: forgot %q, ran %q; want it forgotten (with no object) and not run", d, f.forgot, f.ran)
		}
	}
}

func TestSkeletonReadErrorIsReturned(t *testing.T) {
	f := newSkeletonFixture(t)
	boom := errors.New("cache is gone")
	f.reader = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		},
	}).Build()
	if _, err := f.run(t, "x", forgetDeleting); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	if len(f.forgot) != 0 || len(f.ran) != 0 {
		t.Errorf("forgot %q, ran %q on a read error", f.forgot, f.ran)
	}
}

func TestSkeletonDeleting(t *testing.T) {
	cases := []struct {
		name       string
		objs       []client.Object
		deletion   onDeletion
		wantForgot []string
		wantRan    []string
	}{
		{"object deleting, forget", []client.Object{namespace("ns", false), configMap("ns", "cm", true)}, forgetDeleting, []string{"cm (deleting)"}, nil},
		{"object deleting, skip", []client.Object{namespace("ns", false), configMap("ns", "cm", true)}, skipDeleting, nil, nil},
		{"object deleting, run", []client.Object{namespace("ns", false), configMap("ns", "cm", true)}, runDeleting, nil, []string{"cm"}},
		{"namespace deleting, forget", []client.Object{namespace("ns", true), configMap("ns", "cm", false)}, forgetDeleting, []string{"cm (deleting)"}, nil},
		{"namespace deleting, skip", []client.Object{namespace("ns", true), configMap("ns", "cm", false)}, skipDeleting, nil, nil},
		{"namespace deleting, run", []client.Object{namespace("ns", true), configMap("ns", "cm", false)}, runDeleting, nil, []string{"cm"}},
		{"neither", []client.Object{namespace("ns", false), configMap("ns", "cm", false)}, forgetDeleting, nil, []string{"cm"}},
		// A namespace the cache does not know may be new: not deleting.
		{"namespace unknown", []client.Object{configMap("ns", "cm", false)}, skipDeleting, nil, []string{"cm"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newSkeletonFixture(t, tc.objs...)
			if res, err := f.run(t, "cm", tc.deletion); err != nil || !res.IsZero() {
				t.Errorf("got %+v, %v; want nothing", res, err)
			}
			if !equalStrings(f.forgot, tc.wantForgot) || !equalStrings(f.ran, tc.wantRan) {
				t.Errorf("forgot %q, ran %q; want forgot %q, ran %q", f.forgot, f.ran, tc.wantForgot, tc.wantRan)
			}
		})
	}
}

// A terminal error was reported already: it is not retried (no backoff,
// no error for controller-runtime to log and requeue), the plan's own
// recheck stands, and it resets the backoff of the request.
func TestSkeletonTerminalErrorDoesNotRequeue(t *testing.T) {
	f := newSkeletonFixture(t, namespace("ns", false), configMap("ns", "cm", false))
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("modified"))

	f.outcome = func() (reconcile.Result, error) { return reconcile.Result{}, conflict }
	first, err := f.run(t, "cm", forgetDeleting)
	if err != nil || first.RequeueAfter <= 0 {
		t.Fatalf("a conflict: %+v, %v; want a quiet retry", first, err)
	}
	second, _ := f.run(t, "cm", forgetDeleting)
	if second.RequeueAfter <= first.RequeueAfter {
		t.Fatalf("no backoff: %s then %s", first.RequeueAfter, second.RequeueAfter)
	}

	// The same conflict, reported and terminal: not retried, however
	// retryable its cause.
	before := retried(t, "conflict")
	f.outcome = func() (reconcile.Result, error) { return reconcile.Result{}, terminal(conflict, nil) }
	if res, err := f.run(t, "cm", forgetDeleting); err != nil || !res.IsZero() {
		t.Errorf("terminal: %+v, %v; want no error and no requeue", res, err)
	}
	if got := retried(t, "conflict"); got != before {
		t.Errorf("a terminal error was counted as a retry (%v -> %v)", before, got)
	}
	// With a recheck the plan asked for (a claim's expiry): it stands.
	f.outcome = func() (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Hour}, reconcile.TerminalError(errors.New("pool not found"))
	}
	if res, err := f.run(t, "cm", forgetDeleting); err != nil || res.RequeueAfter != time.Hour {
		t.Errorf("terminal with a recheck: %+v, %v; want the recheck in an hour and no error", res, err)
	}

	// The backoff starts over after a terminal outcome.
	f.outcome = func() (reconcile.Result, error) { return reconcile.Result{}, conflict }
	if again, _ := f.run(t, "cm", forgetDeleting); again.RequeueAfter != first.RequeueAfter {
		t.Errorf("after a terminal error the retry waits %s, want the base %s", again.RequeueAfter, first.RequeueAfter)
	}

	// A report that failed is retried instead.
	f.outcome = func() (reconcile.Result, error) { return reconcile.Result{}, terminal(errors.New("denied"), conflict) }
	if res, err := f.run(t, "cm", forgetDeleting); err != nil || res.RequeueAfter <= 0 {
		t.Errorf("failed report: %+v, %v; want a quiet retry", res, err)
	}
	// And an unexpected error goes to controller-runtime.
	boom := errors.New("boom")
	f.outcome = func() (reconcile.Result, error) { return reconcile.Result{}, boom }
	if _, err := f.run(t, "cm", forgetDeleting); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
