package ssa

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// podOwnedBy is a Pod whose labels and container image manager applied,
// with its Apply entry stamped at second sec.
func podOwnedBy(manager string, uid, image string, sec int) *corev1.Pod {
	fields := `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:name":{}}}}}`
	at := metav1.Unix(int64(1700000000+sec), 0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "box", Namespace: "ns", UID: typesUID(uid), Labels: map[string]string{"app": "box", "other": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
				Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields),
			}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
}

func TestExtractRemembersPerEntryAndUID(t *testing.T) {
	e := New(nil, "mgr", "mgr-status")
	calls := 0
	extract := countedExtractPod(&calls)
	pod := podOwnedBy("mgr", "u1", "img:1", 0)
	first, err := Extract(e, "Pod", pod, "mgr", "", extract)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Labels; len(got) != 1 || got["app"] != "box" {
		t.Fatalf("extracted labels %v, want only the owned app label", got)
	}
	// The Pod's status (or an unowned field) moves on: same entry, no
	// extraction, the same answer.
	pod.Status.Phase = corev1.PodRunning
	pod.Labels["other"] = "y"
	again, err := Extract(e, "Pod", pod, "mgr", "", extract)
	if err != nil || calls != 1 {
		t.Fatalf("second extraction: calls %d, err %v; want 1 call", calls, err)
	}
	if !apiequality.Semantic.DeepEqual(first, again) {
		t.Errorf("remembered extraction differs:\n%v\n%v", first, again)
	}
	// Every caller gets its own copy.
	again.Labels["app"] = "changed"
	third, _ := Extract(e, "Pod", pod, "mgr", "", extract)
	if third.Labels["app"] != "box" {
		t.Errorf("a caller's change reached the memory: %v", third.Labels)
	}
	// Our entry changes (we applied a new image): extracted again.
	changed := podOwnedBy("mgr", "u1", "img:2", 1)
	got, _ := Extract(e, "Pod", changed, "mgr", "", extract)
	if calls != 2 || *got.Spec.Containers[0].Image != "img:2" {
		t.Errorf("after our entry changed: calls %d, image %s; want 2, img:2", calls, *got.Spec.Containers[0].Image)
	}
	// A namesake (another UID) with an identical entry is not answered
	// from the memory of the first.
	namesake := podOwnedBy("mgr", "u2", "img:3", 1)
	got, _ = Extract(e, "Pod", namesake, "mgr", "", extract)
	if calls != 3 || *got.Spec.Containers[0].Image != "img:3" {
		t.Errorf("namesake: calls %d, image %s; want 3, img:3", calls, *got.Spec.Containers[0].Image)
	}
	// Forgotten with the object.
	e.Forget("Pod", "ns", "box")
	if _, _ = Extract(e, "Pod", namesake, "mgr", "", extract); calls != 4 {
		t.Errorf("after Forget: calls %d, want 4", calls)
	}
	if s := e.Stats(); s.Extractions != 4 || s.ExtractionsRemembered != 2 {
		t.Errorf("stats %+v, want 4 extractions, 2 remembered", s)
	}
}

func TestExtractWithoutApplyEntry(t *testing.T) {
	e := New(nil, "mgr", "mgr-status")
	pod := podOwnedBy("someone-else", "u1", "img:1", 0)
	calls := 0
	for range 2 {
		if _, err := Extract(e, "Pod", pod, "mgr", "", func(p *corev1.Pod, m string) (*corev1ac.PodApplyConfiguration, error) {
			calls++
			return corev1ac.ExtractPod(p, m)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("with no entry of ours nothing is remembered: calls %d, want 2", calls)
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// countedExtractPod is corev1ac.ExtractPod counting its calls in calls.
func countedExtractPod(calls *int) func(*corev1.Pod, string) (*corev1ac.PodApplyConfiguration, error) {
	return func(p *corev1.Pod, m string) (*corev1ac.PodApplyConfiguration, error) {
		*calls++
		return corev1ac.ExtractPod(p, m)
	}
}

// TestComparisonsReadButDoNotFillTheExtractionMemory: the engine's own
// comparison (ownsDesired, through extractRemembered with remember false)
// uses an extraction Extract remembered, and remembers none of its own.
func TestComparisonsReadButDoNotFillTheExtractionMemory(t *testing.T) {
	e := New(nil, "mgr", "mgr-status")
	calls := 0
	extract := countedExtractPod(&calls)
	pod := podOwnedBy("mgr", "u1", "img:1", 0)
	for range 2 {
		if _, err := extractRemembered(e, "Pod", pod, "mgr", "", extract, false); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 || e.extracted.Len() != 0 {
		t.Errorf("not remembering: calls %d, remembered %d; want 2, 0", calls, e.extracted.Len())
	}
	if _, err := Extract(e, "Pod", pod, "mgr", "", extract); err != nil {
		t.Fatal(err)
	}
	if _, err := extractRemembered(e, "Pod", pod, "mgr", "", extract, false); err != nil || calls != 3 {
		t.Errorf("after Extract remembered it: calls %d (%v), want 3", calls, err)
	}
}
