package controllers

import (
	"fmt"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
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

// templateSandbox is a Sandbox of template hash h in ns whose spec is
// decoded on its own, with image.
func templateSandbox(ns, name, h, image string) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if h != "" {
		sb.Labels = map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: h}
	}
	sb.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{
		Name: "agent", Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}}}
	return sb
}

func containersOf(sb *sandboxv1beta1.Sandbox) *corev1.Container {
	return &sb.Spec.PodTemplate.Spec.Containers[0]
}

// TestPodSpecsShared: Sandboxes of one template in one namespace with
// equal specs share one copy of the spec's contents; another namespace,
// another spec (a template changed, a claim's own environment), or no
// template label keeps its own; a deep copy is the reader's own. Sandboxes
// made alike without a template share theirs; another environment or
// runtime class keeps its own.
func TestPodSpecsShared(t *testing.T) {
	share := shareSpecs(func(o any) (any, error) { return o, nil })
	got := func(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox {
		o, err := share(sb)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*sandboxv1beta1.Sandbox)
	}
	a := got(templateSandbox("ns", "a", "h1", "python:3"))
	b := got(templateSandbox("ns", "b", "h1", "python:3"))
	if containersOf(a) != containersOf(b) {
		t.Error("two Sandboxes of one template with equal specs hold copies of their own")
	}
	if b.Spec.PodTemplate.Spec.Containers[0].Image != "python:3" || b.Name != "b" {
		t.Errorf("shared spec changed the Sandbox: %+v", b)
	}
	other := got(templateSandbox("other", "c", "h1", "python:3"))
	changed := got(templateSandbox("ns", "d", "h1", "python:4"))
	bare := got(templateSandbox("ns", "e", "", "python:3"))
	for _, sb := range []*sandboxv1beta1.Sandbox{other, changed, bare} {
		if containersOf(sb) == containersOf(a) {
			t.Errorf("Sandbox %s/%s shares the spec of another namespace, spec or none", sb.Namespace, sb.Name)
		}
	}
	if containersOf(changed).Image != "python:4" {
		t.Errorf("a changed spec was replaced: %s", containersOf(changed).Image)
	}
	// The changed spec is now the one held: the next of it shares it.
	if next := got(templateSandbox("ns", "f", "h1", "python:4")); containersOf(next) != containersOf(changed) {
		t.Error("the template's new spec is not shared")
	}
	if cp := a.DeepCopy(); containersOf(cp) == containersOf(a) {
		t.Error("a deep copy shares the cached spec")
	}
	// Sandboxes made without a template share by their containers and
	// runtime class once the whole spec is equal.
	if alike := got(templateSandbox("ns", "g", "", "python:3")); containersOf(alike) != containersOf(bare) {
		t.Error("two Sandboxes made alike without a template hold copies of their own")
	}
	env := templateSandbox("ns", "h", "", "python:3")
	env.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TASK", Value: "h"}}
	if got(env); containersOf(env) == containersOf(bare) || len(containersOf(env).Env) != 1 {
		t.Error("a Sandbox with its own environment was given another's spec")
	}
	gvisor := templateSandbox("ns", "i", "", "python:3")
	gvisor.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To("gvisor")
	if got(gvisor); containersOf(gvisor) == containersOf(bare) || gvisor.Spec.PodTemplate.Spec.RuntimeClassName == nil {
		t.Error("a Sandbox of another runtime class was given another's spec")
	}
}
