package ssa

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DryRunApply previews a server-side apply of obj as manager (forced, as
// the controller applies what it renders): the live object (nil when
// absent) and what the API server would make of it. Nothing is written.
func DryRunApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured, manager string) (live, after *unstructured.Unstructured, err error) {
	live = &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, nil, err
	}
	after = obj.DeepCopy()
	after.SetResourceVersion("")
	after.SetManagedFields(nil)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), client.FieldOwner(manager), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, nil, err
	}
	return live, after, nil
}

// DiffObjects is a unified diff of two objects' YAML without the fields
// every write changes (managedFields, resourceVersion, generation, the
// creation time, the UID) and status; "" when they are the same. A nil
// before is an object about to be created.
func DiffObjects(name string, before, after *unstructured.Unstructured) string {
	a, b := "", comparableYAML(after)
	if before != nil {
		a = comparableYAML(before)
	}
	if a == b {
		return ""
	}
	from, to := "live "+name, "applied "+name
	if before == nil {
		from = "(absent) " + name
	}
	out, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b), FromFile: from, ToFile: to, Context: 3,
	})
	return out
}

// comparableYAML is u as YAML without what DiffObjects leaves out.
func comparableYAML(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	for _, f := range [][]string{
		{"metadata", "managedFields"}, {"metadata", "resourceVersion"}, {"metadata", "generation"},
		{"metadata", "creationTimestamp"}, {"metadata", "uid"}, {"status"},
	} {
		unstructured.RemoveNestedField(c.Object, f...)
	}
	b, err := json.Marshal(c.Object)
	if err != nil {
		return err.Error()
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(y)) + "\n"
}
