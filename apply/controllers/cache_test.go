package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
		full(nil, metav1.OwnerReference{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox", Name: "s", Controller: &yes}),
	}
	for _, p := range kept {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "i", ImageID: "sha256:abc"}}
		p.Status.HostIP, p.Status.QOSClass = "192.0.2.1", corev1.PodQOSBestEffort
		got, _ := TrimForeignPod(p)
		if got.(*corev1.Pod) != p || len(p.ManagedFields) == 0 || len(p.Spec.Containers) != 1 {
			t.Errorf("sandbox pod %v was trimmed", p.Labels)
		}
		want := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if !apiequality.Semantic.DeepEqual(p.Status, want) {
			t.Errorf("sandbox pod status kept %+v, want %+v", p.Status, want)
		}
	}
	// A Sandbox of another API group is not ours: its Pod is trimmed.
	lookalike := full(nil, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Sandbox", Name: "s", Controller: &yes})
	if got, _ := TrimForeignPod(lookalike); len(got.(*corev1.Pod).Spec.Containers) != 0 {
		t.Errorf("a Pod controlled by a Sandbox of another group was kept whole")
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

func TestCacheKeepsOnlyOurManagedFields(t *testing.T) {
	entries := func(managers ...string) []metav1.ManagedFieldsEntry {
		var out []metav1.ManagedFieldsEntry
		for _, m := range managers {
			out = append(out, metav1.ManagedFieldsEntry{Manager: m, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)})
		}
		return out
	}
	ours := OwnManagers("agent-sandbox-controller")
	trim := keepManagedFields(ours)
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: entries(
		"kubectl-client-side-apply", "agent-sandbox-controller", "agent-sandbox-controller-status",
		"agent-sandbox-controller-annotations", sandboxv1beta1.FieldManagerOperatingMode, sandboxv1beta1.FieldManagerActivity,
		"agent-sandbox-controllerX")}}
	got, err := trim(sb)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, m := range got.(*sandboxv1beta1.Sandbox).ManagedFields {
		kept = append(kept, m.Manager)
	}
	want := []string{"agent-sandbox-controller", "agent-sandbox-controller-status", "agent-sandbox-controller-annotations",
		sandboxv1beta1.FieldManagerOperatingMode, sandboxv1beta1.FieldManagerActivity}
	if strings.Join(kept, ",") != strings.Join(want, ",") {
		t.Errorf("kept %v, want %v (a name merely starting with ours is not ours)", kept, want)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: "abc"},
		ManagedFields: entries("kwok-controller", "agent-sandbox-controller")}}
	opts := CacheOptions(ours)
	for obj, by := range opts.ByObject {
		if _, isPod := obj.(*corev1.Pod); isPod {
			got, _ := by.Transform(pod)
			if mf := got.(*corev1.Pod).ManagedFields; len(mf) != 1 || mf[0].Manager != "agent-sandbox-controller" {
				t.Errorf("a Sandbox's Pod keeps %v", mf)
			}
		}
	}
	if v, _ := trim("tombstone"); v != "tombstone" {
		t.Error("non-objects must pass through")
	}
	all := &corev1.Service{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries("a", "b")}}
	if got, _ := keepManagedFields(nil)(all); len(got.(*corev1.Service).ManagedFields) != 2 {
		t.Error("nil managers must keep every entry")
	}
}
