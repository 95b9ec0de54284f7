package ssa

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

func TestTopKeys(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
		ok   bool
	}{
		{`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{}}}}}`,
			[]string{"f:metadata", "f:spec"}, true},
		// Braces and escaped quotes inside keys, nested and at the top.
		{` {"f:status":{"k:{\"a\":\"}\\\"{\"}":{}}, "k:{\"x\":\"{\"}":{}}`, []string{"f:status", `k:{\"x\":\"{\"}`}, true},
		{`{}`, nil, true},
		{``, nil, false},
		{`[]`, nil, false},
		{`{"f:spec":{}`, nil, false},
		{`{"f:spec":{}}}`, nil, false},
		{`{"f:spec`, nil, false},
	} {
		got, ok := topKeys(c.raw)
		if ok != c.ok || (ok && !slices.Equal(got, c.want)) {
			t.Errorf("topKeys(%s) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

// asJSON is v as JSON, for comparing extractions.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entry(manager, subresource string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// TestTrimmedExtraction: an extraction from the trimmed copy is the
// extraction from the object, for managers that reach spec and metadata,
// metadata alone, and status alone; the copy holds none of what the manager
// does not reach, and the object is not changed.
func TestTrimmedExtraction(t *testing.T) {
	pod := podOwnedBy("mgr", "u1", "img:1", 0)
	pod.ManagedFields = append(pod.ManagedFields,
		entry("kubelet", "status", metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:phase":{},"f:podIP":{}}}`))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}

	sb := &sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "ns", UID: "u2",
			Annotations: map[string]string{sandboxv1beta1.AnnotationPodName: "box", "user": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				entry("user", "", metav1.ManagedFieldsOperationApply,
					`{"f:metadata":{"f:annotations":{"f:user":{}}},"f:spec":{"f:podTemplate":{"f:spec":{"f:containers":{}}}}}`),
				entry("mgr-annotations", "", metav1.ManagedFieldsOperationApply,
					`{"f:metadata":{"f:annotations":{"f:agents.x-k8s.io/pod-name":{}}}}`),
				entry("mgr-status", "status", metav1.ManagedFieldsOperationApply,
					`{"f:status":{"f:service":{},"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:type":{},"f:status":{},"f:reason":{},"f:message":{},"f:lastTransitionTime":{},"f:observedGeneration":{}}}}}`),
			}},
		Status: sandboxv1beta1.SandboxStatus{Service: "box", ServiceFQDN: "box.ns.svc",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady", LastTransitionTime: metav1.Unix(1700000000, 0)}}},
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "img:1", Args: []string{"a", "b"}}}
	podBefore, sbBefore := pod.DeepCopy(), sb.DeepCopy()

	check := func(name string, full, trimmed any, err1, err2 error) {
		t.Helper()
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v, %v", name, err1, err2)
		}
		if a, b := asJSON(t, full), asJSON(t, trimmed); a != b || a == "{}" {
			t.Errorf("%s: extraction from the trimmed copy differs:\n%s\n%s", name, a, b)
		}
	}
	full, err1 := corev1ac.ExtractPod(pod, "mgr")
	tp := trimmedFor(pod, applyEntry(pod, "mgr", ""))
	trimmed, err2 := corev1ac.ExtractPod(tp, "mgr")
	check("pod", full, trimmed, err1, err2)
	if tp.Status.Phase != "" || len(tp.Status.Conditions) != 0 || len(tp.ManagedFields) != 1 || len(tp.Spec.Containers) != 1 {
		t.Errorf("trimmed pod keeps status %+v, %d managedFields entries, %d containers", tp.Status, len(tp.ManagedFields), len(tp.Spec.Containers))
	}

	fullSb, err1 := sandboxac.ExtractSandbox(sb, "mgr-annotations")
	ta := trimmedFor(sb, applyEntry(sb, "mgr-annotations", ""))
	trimmedSb, err2 := sandboxac.ExtractSandbox(ta, "mgr-annotations")
	check("annotations", fullSb, trimmedSb, err1, err2)
	if len(ta.Spec.PodTemplate.Spec.Containers) != 0 || len(ta.Status.Conditions) != 0 {
		t.Errorf("trimmed for the annotation manager keeps spec or status: %+v", ta)
	}

	fullSt, err1 := sandboxac.ExtractSandboxStatus(sb, "mgr-status")
	ts := trimmedFor(sb, applyEntry(sb, "mgr-status", "status"))
	trimmedSt, err2 := sandboxac.ExtractSandboxStatus(ts, "mgr-status")
	check("status", fullSt, trimmedSt, err1, err2)
	if len(ts.Spec.PodTemplate.Spec.Containers) != 0 || len(ts.Status.Conditions) != 1 {
		t.Errorf("trimmed for the status manager: spec %+v, status %+v", ts.Spec, ts.Status)
	}

	if !apiequality.Semantic.DeepEqual(pod, podBefore) || !apiequality.Semantic.DeepEqual(sb, sbBefore) {
		t.Error("trimming changed the object it was given")
	}
	// No entry of the manager's: a copy with no top-level field and no
	// managedFields, from which the extraction is the same: the name.
	bare := trimmedFor(sb, applyEntry(sb, "nobody", "status"))
	fullNone, err1 := sandboxac.ExtractSandboxStatus(sb, "nobody")
	bareNone, err2 := sandboxac.ExtractSandboxStatus(bare, "nobody")
	check("no entry", fullNone, bareNone, err1, err2)
	if len(bare.Spec.PodTemplate.Spec.Containers) != 0 || len(bare.Status.Conditions) != 0 || len(bare.ManagedFields) != 0 || bare.Name != "box" {
		t.Errorf("the copy for a manager with no entry keeps spec, status or managedFields, or lost its name: %+v", bare)
	}
	barePod := trimmedFor(pod, applyEntry(pod, "nobody", ""))
	fullPod, err1 := corev1ac.ExtractPod(pod, "nobody")
	bareExtract, err2 := corev1ac.ExtractPod(barePod, "nobody")
	check("no entry, pod", fullPod, bareExtract, err1, err2)
	if !apiequality.Semantic.DeepEqual(pod, podBefore) || !apiequality.Semantic.DeepEqual(sb, sbBefore) {
		t.Error("the copy for a manager with no entry changed the object it was given")
	}
}
