package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestHoldsAnyAnnotation(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	podName := `{"f:metadata":{"f:annotations":{"f:agents.x-k8s.io/pod-name":{}},"f:labels":{"f:a":{}}}}`
	labelsOnly := `{"f:metadata":{"f:labels":{"f:a":{}}},"f:spec":{"f:podTemplate":{}}}`
	keys := []string{sandboxv1beta1.AnnotationPodName}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"none", nil, false},
		{"ours by apply", []metav1.ManagedFieldsEntry{entry("ctrl", metav1.ManagedFieldsOperationApply, podName)}, true},
		{"ours by an older controller's update", []metav1.ManagedFieldsEntry{entry("ctrl", metav1.ManagedFieldsOperationUpdate, podName)}, true},
		{"ours without it", []metav1.ManagedFieldsEntry{entry("ctrl", metav1.ManagedFieldsOperationApply, labelsOnly)}, false},
		{"another manager's", []metav1.ManagedFieldsEntry{entry("ctrl-annotations", metav1.ManagedFieldsOperationApply, podName)}, false},
		{"unreadable: look", []metav1.ManagedFieldsEntry{entry("ctrl", metav1.ManagedFieldsOperationApply, `{`)}, true},
	} {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
		if got := holdsAnyAnnotation(sb, "ctrl", keys); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
