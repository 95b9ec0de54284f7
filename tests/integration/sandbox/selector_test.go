package sandbox

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// labelHistory records, from a watch, the resourceVersion of every version
// of the Pods and Services of a namespace and whether it requires (Service
// selector) or carries (Pod label) the sandbox-uid label.
type labelHistory struct {
	mu   sync.Mutex
	pods map[int64]bool // resourceVersion -> Pod has the sandbox-uid label
	svcs map[int64]bool // resourceVersion -> Service selector requires it
}

func watchLabels(t *testing.T, ns string) *labelHistory {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &labelHistory{pods: map[int64]bool{}, svcs: map[int64]bool{}}
	for _, list := range []func() (watch.Interface, error){
		func() (watch.Interface, error) { return cs.CoreV1().Pods(ns).Watch(ctxFor(t), metav1.ListOptions{}) },
		func() (watch.Interface, error) {
			return cs.CoreV1().Services(ns).Watch(ctxFor(t), metav1.ListOptions{})
		},
	} {
		w, err := list()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				h.record(ev.Object)
			}
		}()
	}
	return h
}

func (h *labelHistory) record(o any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch o := o.(type) {
	case *corev1.Pod:
		rv, _ := strconv.ParseInt(o.ResourceVersion, 10, 64)
		h.pods[rv] = o.Labels[sandboxv1beta1.LabelSandboxUID] != ""
	case *corev1.Service:
		rv, _ := strconv.ParseInt(o.ResourceVersion, 10, 64)
		h.svcs[rv] = o.Spec.Selector[sandboxv1beta1.LabelSandboxUID] != ""
	}
}

// check reports a Service version that required the label before any Pod
// version carried it (resourceVersions of one etcd are ordered).
func (h *labelHistory) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	firstLabelled := int64(-1)
	for rv, has := range h.pods {
		if has && (firstLabelled < 0 || rv < firstLabelled) {
			firstLabelled = rv
		}
	}
	for rv, requires := range h.svcs {
		if requires && (firstLabelled < 0 || rv < firstLabelled) {
			return fmt.Errorf("the Service required sandbox-uid at resourceVersion %d, the Pod had it only at %d", rv, firstLabelled)
		}
	}
	return nil
}

// TestServiceNeverDropsAnUnlabelledPod: a running Pod without the
// sandbox-uid label (made before the label existed; here an unowned Pod
// the Sandbox adopts) stays behind its Service: the Service selects by name
// hash alone until the Pod carries the label, then by name hash and UID,
// and the Pod is kept, not recreated.
func TestServiceNeverDropsAnUnlabelledPod(t *testing.T) {
	ns := env.Namespace(t)
	history := watchLabels(t, ns)
	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy",
			Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: render.NameHash("legacy")}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo:1"}}},
	}
	if err := env.Client.Create(ctxFor(t), old); err != nil {
		t.Fatal(err)
	}
	sb := create(t, newSandbox(ns, "legacy", withService(true)))
	eventually(t, "the Service selects by UID and the Pod carries it", func() error {
		pod, err := get(t, ns, "legacy", &corev1.Pod{})
		if err != nil {
			return err
		}
		svc, err := get(t, ns, "legacy", &corev1.Service{})
		if err != nil {
			return err
		}
		if pod.UID != old.UID {
			return fmt.Errorf("the Pod was recreated")
		}
		if pod.Labels[sandboxv1beta1.LabelSandboxUID] != string(sb.UID) || svc.Spec.Selector[sandboxv1beta1.LabelSandboxUID] != string(sb.UID) {
			return fmt.Errorf("pod labels %v, service selector %v", pod.Labels, svc.Spec.Selector)
		}
		return nil
	})
	if err := history.check(); err != nil {
		t.Error(err)
	}
}
