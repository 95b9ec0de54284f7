package controllers

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWithFields is a Pod whose managedFields entry of manager holds raw,
// in bytes and strings of its own (as a decoder makes them).
func podWithFields(name, manager, raw string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{
		Manager: string([]byte(manager)), Operation: metav1.ManagedFieldsOperationApply, APIVersion: string([]byte("v1")),
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)},
	}}}}
}

func rawOf(p *corev1.Pod) []byte { return p.ManagedFields[0].FieldsV1.Raw }

// TestManagedFieldsShared: equal managedFields of cached objects share one
// copy of their bytes and strings, unequal ones do not, the content is
// unchanged, and a copy no object holds leaves the table.
func TestManagedFieldsShared(t *testing.T) {
	in := newFieldsInterner()
	trim := keepManagedFieldsIn([]string{"ours"}, in)
	spec := `{"f:spec":{"f:containers":{"k:{\"name\":\"runtime\"}":{".":{},"f:image":{}}}}}`
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		o, err := trim(podWithFields(n, "ours", spec))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, o.(*corev1.Pod))
	}
	other, _ := trim(podWithFields("d", "ours", `{"f:metadata":{}}`))
	for _, p := range pods[1:] {
		if &rawOf(p)[0] != &rawOf(pods[0])[0] {
			t.Errorf("Pod %s's managedFields bytes are a copy of their own; want the one shared copy", p.Name)
		}
		if unsafe.StringData(p.ManagedFields[0].Manager) != unsafe.StringData(pods[0].ManagedFields[0].Manager) {
			t.Errorf("Pod %s's manager string is a copy of its own", p.Name)
		}
	}
	if string(rawOf(pods[2])) != spec {
		t.Errorf("shared bytes %q; want %q", rawOf(pods[2]), spec)
	}
	if d := other.(*corev1.Pod); &rawOf(d)[0] == &rawOf(pods[0])[0] || string(rawOf(d)) != `{"f:metadata":{}}` {
		t.Errorf("a Pod with other fields shares %q", rawOf(d))
	}
	// A deep copy (what a reader may change) has bytes of its own.
	if cp := pods[0].DeepCopy(); &rawOf(cp)[0] == &rawOf(pods[0])[0] {
		t.Error("a deep copy shares the cached bytes")
	}

	// Nothing holds them any more: the table lets them go.
	pods, other = nil, nil
	_ = other
	deadline := time.Now().Add(10 * time.Second)
	for in.size() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if n := in.size(); n != 0 {
		t.Errorf("the table holds %d copies no object refers to", n)
	}
}
