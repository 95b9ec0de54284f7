package standin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

var sandboxes = sandboxv1beta1.GroupVersion.WithResource("sandboxes")

// fakeCluster is what reconcile sees: a Pod cache, Sandboxes and kwok
// objects (a fake dynamic client that also creates on apply), and PVCs.
type fakeCluster struct {
	pods *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	idx  cache.Indexer
	dir  string
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	lists := map[schema.GroupVersionResource]string{sandboxes: "SandboxList", portForwards: "PortForwardList", execs: "ExecList", logs: "LogsList"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists)
	dyn.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		tracker := dyn.Tracker()
		if _, err := tracker.Get(p.GetResource(), p.GetNamespace(), p.GetName()); apierrors.IsNotFound(err) {
			return true, u, tracker.Create(p.GetResource(), u, p.GetNamespace())
		}
		return true, u, tracker.Update(p.GetResource(), u, p.GetNamespace())
	})
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{sandboxIndex: func(obj any) ([]string, error) {
		k, _ := KeyOf(obj.(*corev1.Pod))
		return []string{k.String()}, nil
	}})
	return &fakeCluster{pods: fake.NewClientset(), dyn: dyn, idx: idx, dir: t.TempDir()}
}

// standIn is a stand-in on the fake cluster, as if just started (nothing
// applied yet); its processes are stopped when the test ends.
func (f *fakeCluster) standIn(t *testing.T) *StandIn {
	t.Helper()
	s := &StandIn{
		o:  Options{Dir: f.dir, Runtime: runtimeBin, StopGrace: 2 * time.Second, ReadyTimeout: 10 * time.Second}.withDefaults(),
		cs: f.pods, dyn: f.dyn, pods: f.idx, applied: map[Key]applied{}, pumps: map[Key]*pumpHandle{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[Key]()),
	}
	t.Cleanup(func() { s.stopPumps(); _ = StopAll(f.dir, time.Second) })
	return s
}

func (f *fakeCluster) sandbox(t *testing.T, name string, uid types.UID) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(sandboxv1beta1.GroupVersion.String())
	u.SetKind("Sandbox")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(uid)
	if _, err := f.dyn.Resource(sandboxes).Namespace("ns").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeCluster) pod(t *testing.T, sandbox string, sandboxUID, uid types.UID) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: sandbox, UID: uid, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: sandbox, UID: sandboxUID, Controller: new(true),
		}}},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "agent"}}},
	}
	if err := f.idx.Add(pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func (f *fakeCluster) kwokObject(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	return f.dyn.Resource(gvr).Namespace("ns").Get(context.Background(), name, metav1.GetOptions{})
}

func reconcileOK(t *testing.T, s *StandIn, k Key) State {
	t.Helper()
	if _, err := s.reconcile(context.Background(), k); err != nil {
		t.Fatalf("reconcile %v: %v", k, err)
	}
	st, err := readState(SandboxDir(s.o.Dir, k))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A Sandbox's life as the stand-in sees it: its Pod gets a runtime and kwok
// objects; a restarted stand-in adopts the runtime; a suspend stops it and
// deletes the objects but keeps the directory; the resumed Pod gets a new
// runtime in the same directory; the directory goes only once the Sandbox
// and its PVCs are gone.
func TestReconcileLifecycle(t *testing.T) {
	f := newFakeCluster(t)
	k := Key{"ns", "sb"}
	f.sandbox(t, "sb", "sb-uid")
	pod := f.pod(t, "sb", "sb-uid", "pod-1")
	s := f.standIn(t)

	st := reconcileOK(t, s, k)
	if st.SandboxUID != "sb-uid" || st.Pod != "sb" || st.PodUID != "pod-1" || !alive(st.PID, SandboxDir(f.dir, k)) {
		t.Fatalf("state after the Pod came: %+v (runtime alive %v)", st, alive(st.PID, SandboxDir(f.dir, k)))
	}
	pf, err := f.kwokObject(portForwards, "sb")
	if err != nil {
		t.Fatal(err)
	}
	forwards := pf.Object["spec"].(map[string]any)["forwards"].([]any)
	if len(forwards) != 4 || st.RESTPort == 0 || st.GRPCPort == 0 || st.EnvdPort == 0 {
		t.Errorf("PortForward forwards %v for state %+v, want the legacy, REST, gRPC and envd ports", forwards, st)
	}
	target := forwards[0].(map[string]any)["target"].(map[string]any)
	if target["port"] != int64(st.Port) && target["port"] != float64(st.Port) {
		t.Errorf("PortForward target %v, want port %d", target, st.Port)
	}
	if err := os.WriteFile(filepath.Join(WorkDir(f.dir, k), "kept.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.dyn.ClearActions()
	if again := reconcileOK(t, s, k); again != st || len(f.dyn.Actions()) != 0 {
		t.Errorf("a second reconcile changed %+v to %+v or sent %d requests", st, again, len(f.dyn.Actions()))
	}

	// A new stand-in adopts the process and applies the objects once.
	s2 := f.standIn(t)
	if adopted := reconcileOK(t, s2, k); adopted.PID != st.PID || adopted.Port != st.Port {
		t.Errorf("after a restart the state is %+v, want the adopted %+v", adopted, st)
	}
	s.stopPumps()

	// Suspend: the Pod goes.
	if err := f.idx.Delete(pod); err != nil {
		t.Fatal(err)
	}
	suspended := reconcileOK(t, s2, k)
	if suspended != (State{SandboxUID: "sb-uid"}) || alive(st.PID, SandboxDir(f.dir, k)) {
		t.Errorf("after the Pod went: state %+v, runtime alive %v", suspended, alive(st.PID, SandboxDir(f.dir, k)))
	}
	for _, gvr := range []schema.GroupVersionResource{portForwards, execs, logs} {
		if _, err := f.kwokObject(gvr, "sb"); !apierrors.IsNotFound(err) {
			t.Errorf("%s of the deleted Pod: %v", gvr.Resource, err)
		}
	}

	// Resume: a new Pod, a new process, the same files.
	f.pod(t, "sb", "sb-uid", "pod-2")
	resumed := reconcileOK(t, s2, k)
	if resumed.PodUID != "pod-2" || resumed.PID == st.PID || !alive(resumed.PID, SandboxDir(f.dir, k)) {
		t.Errorf("after the resume: %+v", resumed)
	}
	if data, err := os.ReadFile(filepath.Join(WorkDir(f.dir, k), "kept.txt")); err != nil || string(data) != "kept" {
		t.Errorf("the work directory after a resume: %q, %v", data, err)
	}

	// The Sandbox is deleted; a PVC it owned is still there.
	for _, obj := range f.idx.List() {
		_ = f.idx.Delete(obj)
	}
	if err := f.dyn.Resource(sandboxes).Namespace("ns").Delete(context.Background(), "sb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home-sb",
		Labels:          map[string]string{sandboxv1beta1.LabelSandboxNameHash: render.NameHash("sb")},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "sb", UID: "sb-uid"}},
	}}
	if _, err := f.pods.CoreV1().PersistentVolumeClaims("ns").Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, s2, k)
	if alive(resumed.PID, SandboxDir(f.dir, k)) {
		t.Error("the runtime still runs after its Pod and Sandbox went")
	}
	if _, err := os.Stat(WorkDir(f.dir, k)); err != nil {
		t.Errorf("the directory went while a PVC of the Sandbox is left: %v", err)
	}
	if err := f.pods.CoreV1().PersistentVolumeClaims("ns").Delete(context.Background(), "home-sb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, s2, k)
	if _, err := os.Stat(SandboxDir(f.dir, k)); !os.IsNotExist(err) {
		t.Errorf("the directory is left after the Sandbox and its PVCs went: %v", err)
	}
}

// A new Sandbox with a deleted one's name starts with an empty directory.
func TestReconcileNewSandboxSameName(t *testing.T) {
	f := newFakeCluster(t)
	k := Key{"ns", "sb"}
	s := f.standIn(t)
	if err := os.MkdirAll(WorkDir(f.dir, k), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(WorkDir(f.dir, k), "old.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeState(SandboxDir(f.dir, k), State{SandboxUID: "old-uid"}); err != nil {
		t.Fatal(err)
	}
	f.sandbox(t, "sb", "new-uid")
	f.pod(t, "sb", "new-uid", "pod-1")
	st := reconcileOK(t, s, k)
	if st.SandboxUID != "new-uid" {
		t.Errorf("state %+v, want the new Sandbox's", st)
	}
	if _, err := os.Stat(filepath.Join(WorkDir(f.dir, k), "old.txt")); !os.IsNotExist(err) {
		t.Errorf("the old Sandbox's file is in the new one's directory: %v", err)
	}
}
