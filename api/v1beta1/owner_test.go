package v1beta1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestIsControlledBy: an owner is the controller only when the reference
// names its API group, kind, name and UID, in its namespace; a copied UID
// under another group or kind, or a non-controller reference, is not.
func TestIsControlledBy(t *testing.T) {
	owner := &Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "uid-1"}}
	ref := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: &controller}
	}
	cases := []struct {
		name string
		ns   string
		ref  *metav1.OwnerReference
		want bool
	}{
		{"ours", "ns", refp(ref("agents.x-k8s.io/v1beta1", "Sandbox", "box", "uid-1", true)), true},
		{"another version of ours", "ns", refp(ref("agents.x-k8s.io/v1alpha1", "Sandbox", "box", "uid-1", true)), true},
		{"another group", "ns", refp(ref("evil.example.com/v1", "Sandbox", "box", "uid-1", true)), false},
		{"core group", "ns", refp(ref("v1", "Sandbox", "box", "uid-1", true)), false},
		{"another kind", "ns", refp(ref("agents.x-k8s.io/v1beta1", "Pod", "box", "uid-1", true)), false},
		{"another name", "ns", refp(ref("agents.x-k8s.io/v1beta1", "Sandbox", "other", "uid-1", true)), false},
		{"another UID", "ns", refp(ref("agents.x-k8s.io/v1beta1", "Sandbox", "box", "uid-2", true)), false},
		{"not the controller", "ns", refp(ref("agents.x-k8s.io/v1beta1", "Sandbox", "box", "uid-1", false)), false},
		{"unparsable apiVersion", "ns", refp(ref("a/b/c", "Sandbox", "box", "uid-1", true)), false},
		{"another namespace", "other", refp(ref("agents.x-k8s.io/v1beta1", "Sandbox", "box", "uid-1", true)), false},
		{"no reference", "ns", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Namespace: tc.ns, Name: "child"}
			if tc.ref != nil {
				obj.OwnerReferences = []metav1.OwnerReference{*tc.ref}
			}
			if got := IsControlledBy(obj, owner, SandboxKind); got != tc.want {
				t.Errorf("IsControlledBy = %v, want %v", got, tc.want)
			}
			// The index key agrees with IsControlledBy.
			key := ControllerKeyOf(obj)
			if same := key == ControllerKey(SandboxKind, owner.Name, owner.UID); same != (tc.want || tc.name == "another namespace") {
				t.Errorf("ControllerKeyOf = %q: matches the owner's key %v", key, same)
			}
		})
	}
	if RefersTo(metav1.OwnerReference{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"}, schema.GroupKind{Group: "example.com", Kind: "Sandbox"}) {
		t.Error("RefersTo matched another group")
	}
}

func refp(r metav1.OwnerReference) *metav1.OwnerReference { return &r }

func TestAppliedAt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	entry := func(manager string, op metav1.ManagedFieldsOperationType, subresource string, when *metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, Time: when}
	}
	for name, tc := range map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    time.Time
		ok      bool
	}{
		"none":                    {},
		"applied":                 {entries: []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationApply, "", &at)}, want: at.Time, ok: true},
		"another manager":         {entries: []metav1.ManagedFieldsEntry{entry("other", metav1.ManagedFieldsOperationApply, "", &at)}},
		"an update, not an apply": {entries: []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationUpdate, "", &at)}},
		"the status only":         {entries: []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationApply, "status", &at)}},
		"no time":                 {entries: []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationApply, "", nil)}},
		"main resource among others": {entries: []metav1.ManagedFieldsEntry{
			entry("m", metav1.ManagedFieldsOperationApply, "status", &later),
			entry("m", metav1.ManagedFieldsOperationApply, "", &at)}, want: at.Time, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := AppliedAt(&metav1.ObjectMeta{ManagedFields: tc.entries}, "m")
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("AppliedAt = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
