package controllers

import (
	"fmt"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWithEntry is a Pod with one managedFields entry of manager, its
// strings its own (as a decoder makes them).
func podWithEntry(name, manager string) *corev1.Pod {
	own := func(s string) string { return string([]byte(s)) }
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{
		Manager: own(manager), Operation: metav1.ManagedFieldsOperationType(own("Apply")), APIVersion: own("v1"),
		FieldsType: own("FieldsV1"), FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`),
	}}}}
}

// TestManagedStringsShared: the strings of the managedFields entries the
// cache keeps are one copy for all objects, equal to what was decoded;
// past the bound, new strings are left as they are.
func TestManagedStringsShared(t *testing.T) {
	trim := keepManagedFields([]string{"ours"})
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b"} {
		o, err := trim(podWithEntry(n, "ours"))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, o.(*corev1.Pod))
	}
	a, b := pods[0].ManagedFields[0], pods[1].ManagedFields[0]
	for _, f := range []struct{ what, x, y string }{
		{"manager", a.Manager, b.Manager}, {"operation", string(a.Operation), string(b.Operation)},
		{"apiVersion", a.APIVersion, b.APIVersion}, {"fieldsType", a.FieldsType, b.FieldsType},
	} {
		if unsafe.StringData(f.x) != unsafe.StringData(f.y) {
			t.Errorf("the %s strings of two cached objects are copies of their own", f.what)
		}
	}
	if a.Manager != "ours" || a.Operation != metav1.ManagedFieldsOperationApply || a.APIVersion != "v1" || a.FieldsV1.GetRawString() != `{"f:metadata":{}}` {
		t.Errorf("entry changed: %+v", a)
	}

	in := newManagedStrings()
	for i := range maxManagedStrings + 10 {
		in.entries([]metav1.ManagedFieldsEntry{{Manager: fmt.Sprint("m", i)}})
	}
	if n := len(in.strs); n != maxManagedStrings {
		t.Errorf("%d strings kept; want the bound, %d", n, maxManagedStrings)
	}
}
