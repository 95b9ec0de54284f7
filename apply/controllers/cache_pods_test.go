package controllers

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// A Pod named after the Sandbox that controls it is filed under no index
// key, yet podsControlledBy finds it by name, with any Pod of another name
// the Sandbox controls; a namesake's Pod (the Sandbox's old UID) or a Pod
// whose reference names another kind is not the Sandbox's.
func TestPodsControlledByNameAndIndex(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "sb-uid"}}
	yes := true
	pod := func(name, kind string, uid types.UID) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: kind,
				Name: "box", UID: uid, Controller: &yes}}}}
	}
	named, adopted := pod("box", "Sandbox", "sb-uid"), pod("adopted", "Sandbox", "sb-uid")
	if k := podControllerKey(named); k != nil {
		t.Errorf("the Pod named after its Sandbox is indexed under %v", k)
	}
	if k := podControllerKey(adopted); len(k) != 1 {
		t.Errorf("a Pod of another name is indexed under %v, want one key", k)
	}
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		want  []string
		named string // the UID of the Pod of its name it does not control
	}{
		{"named and adopted", []*corev1.Pod{named, adopted}, []string{"adopted", "box"}, ""},
		{"the namesake's Pod", []*corev1.Pod{withUID(pod("box", "Sandbox", "old-uid"), "p1")}, nil, "p1"},
		{"another kind's reference", []*corev1.Pod{withUID(pod("box", "Other", "sb-uid"), "p2"), pod("x", "Other", "sb-uid")}, nil, "p2"},
		{"none", nil, nil, ""},
	} {
		b := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&corev1.Pod{}, IndexController, podControllerKey)
		for _, p := range tc.pods {
			b = b.WithObjects(p.DeepCopy())
		}
		got, named, err := podsControlledBy(context.Background(), b.Build(), sb)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var names []string
		for _, p := range got {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: pods %v, want %v", tc.name, names, tc.want)
		}
		// The Pod of the Sandbox's name it does not control comes back
		// apart, for the caller to judge (adopt, or leave as another's).
		if wantNamed := tc.named; (named == nil) != (wantNamed == "") || named != nil && string(named.UID) != wantNamed {
			t.Errorf("%s: the Pod of its name not controlled = %v, want %q", tc.name, named, wantNamed)
		}
	}
}

func withUID(p *corev1.Pod, uid types.UID) *corev1.Pod {
	p.UID = uid
	return p
}

// The pod-name annotation sent is forgotten once the cache shows it, and
// kept while the cache shows another value (it has not caught up).
func TestPodNameForgottenOnceShown(t *testing.T) {
	r := &SandboxReconciler{}
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "u",
		Annotations: map[string]string{sandboxv1beta1.AnnotationPodName: "old"}}}
	key := types.NamespacedName{Namespace: "ns", Name: "box"}
	r.memory.podName.Remember(key, "u", sent{value: "box"})
	r.podNameShown(sb)
	if _, ok := r.memory.podName.Recall(key, "u"); !ok {
		t.Fatal("forgotten while the cache shows another value")
	}
	sb.Annotations[sandboxv1beta1.AnnotationPodName] = "box"
	r.podNameShown(sb)
	if r.memory.podName.Len() != 0 {
		t.Error("still remembered once the cache shows it")
	}
	// A removal sent ("") is shown by the annotation's absence.
	r.memory.podName.Remember(key, "u", sent{value: ""})
	delete(sb.Annotations, sandboxv1beta1.AnnotationPodName)
	r.podNameShown(sb)
	if r.memory.podName.Len() != 0 {
		t.Error("a removal shown is still remembered")
	}
}
