package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestTrimForeignPod(t *testing.T) {
	full := func(labels map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels, OwnerReferences: owners,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}, Annotations: map[string]string{"big": "value"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status: corev1.PodStatus{PodIP: "10.0.0.1"},
		}
	}
	yes := true
	kept := []*corev1.Pod{
		full(map[string]string{sandboxv1beta1.LabelSandboxNameHash: "abc"}),
		full(map[string]string{sandboxv1beta1.LabelAdoptable: "true"}),
		full(nil, metav1.OwnerReference{Kind: "Sandbox", Name: "s", Controller: &yes}),
	}
	for _, p := range kept {
		got, _ := TrimForeignPod(p)
		if got.(*corev1.Pod) != p || len(p.ManagedFields) == 0 {
			t.Errorf("sandbox pod %v was trimmed", p.Labels)
		}
	}
	foreign := full(map[string]string{"app": "web"}, metav1.OwnerReference{Kind: "ReplicaSet", Name: "rs", Controller: &yes})
	got, _ := TrimForeignPod(foreign)
	p := got.(*corev1.Pod)
	if p.Name != "p" || p.Labels["app"] != "web" || metav1.GetControllerOf(p) == nil {
		t.Errorf("trimmed pod lost identity: %+v", p.ObjectMeta)
	}
	if len(p.Spec.Containers) != 0 || p.Status.PodIP != "" || len(p.ManagedFields) != 0 || len(p.Annotations) != 0 {
		t.Errorf("foreign pod kept heavy fields: %+v", p)
	}
	if v, _ := TrimForeignPod("not a pod"); v != "not a pod" {
		t.Errorf("non-pods must pass through")
	}
}
