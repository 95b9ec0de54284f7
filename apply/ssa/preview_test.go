package ssa

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDiffObjects: fields every write changes and status are not a
// difference; a spec change is, and an absent object diffs from nothing.
func TestDiffObjects(t *testing.T) {
	obj := func(image, rv string, status bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": rv, "uid": "u-" + rv},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}},
		}}
		if status {
			u.Object["status"] = map[string]any{"phase": "Running"}
		}
		return u
	}
	if d := DiffObjects("Pod ns/p", obj("a", "1", true), obj("a", "2", false)); d != "" {
		t.Errorf("only resourceVersion, uid and status differ, got a diff:\n%s", d)
	}
	d := DiffObjects("Pod ns/p", obj("a", "1", false), obj("b", "1", false))
	if !strings.Contains(d, "-  - image: a") || !strings.Contains(d, "+  - image: b") || !strings.Contains(d, "live Pod ns/p") {
		t.Errorf("image change diff:\n%s", d)
	}
	if d := DiffObjects("Pod ns/p", nil, obj("a", "1", false)); !strings.Contains(d, "(absent) Pod ns/p") {
		t.Errorf("create diff:\n%s", d)
	}
}
