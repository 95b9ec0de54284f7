package helm

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// chartLabels are the labels the chart adds to every object's metadata
// (never to a selector or a Pod template), and chartAnnotations the
// annotations: what a normalized comparison with the kustomize bundle
// leaves out.
var (
	chartLabels      = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/part-of"}
	chartAnnotations = []string{"helm.sh/resource-policy"}
)

// Key names an object: kind, namespace and name.
func Key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// Normalize returns the objects by key, without the chart's own labels
// and annotations and without Namespaces (Helm makes the release's with
// --create-namespace; the kustomize bundle has an object for it).
func Normalize(objs []*unstructured.Unstructured) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, k := range chartLabels {
			delete(labels, k)
		}
		o.SetLabels(labels)
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		}
		annotations := o.GetAnnotations()
		for _, k := range chartAnnotations {
			delete(annotations, k)
		}
		o.SetAnnotations(annotations)
		if len(annotations) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		}
		collapseCEL(o.Object)
		k := Key(o)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s rendered twice", k)
		}
		out[k] = o.Object
	}
	return out, nil
}

// Keys returns the sorted keys of normalized objects.
func Keys(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// collapseCEL collapses runs of white space in CEL expressions (keys
// expression and messageExpression), where they mean nothing: YAML
// libraries disagree on the line breaks of folded scalars with
// more-indented lines (kustomize's kyaml keeps an extra one where Helm's
// YAML, like kubectl's, follows the spec), and the policies use them.
func collapseCEL(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expression" || k == "messageExpression") {
				x[k] = strings.Join(strings.Fields(s), " ")
				continue
			}
			collapseCEL(e)
		}
	case []any:
		for _, e := range x {
			collapseCEL(e)
		}
	}
}
