package controllers

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// managedStrings shares the short strings of cached objects' managedFields
// entries (manager, operation, API version, fields type, subresource):
// every cached object repeats the same few, and a decoder gives each its
// own copy. (The entries' field sets, the bulk of them, are shared by
// apimachinery itself when the controller is built with the
// fieldsv1string tag, as `make controller` and the image build it.)
type managedStrings struct {
	mu   sync.Mutex
	strs map[string]string
}

// maxManagedStrings bounds the strings a managedStrings keeps: managers,
// operations, API versions and such are a handful in any cluster; past the
// bound, strings are left as they are.
const maxManagedStrings = 256

func newManagedStrings() *managedStrings {
	return &managedStrings{strs: map[string]string{}}
}

// entries shares the strings of entries in place.
func (in *managedStrings) entries(entries []metav1.ManagedFieldsEntry) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		e.Manager, e.APIVersion = in.str(e.Manager), in.str(e.APIVersion)
		e.Operation = metav1.ManagedFieldsOperationType(in.str(string(e.Operation)))
		e.FieldsType, e.Subresource = in.str(e.FieldsType), in.str(e.Subresource)
	}
}

// str returns the canonical copy of s (in.mu held).
func (in *managedStrings) str(s string) string {
	if s == "" {
		return s
	}
	if c, ok := in.strs[s]; ok {
		return c
	}
	if len(in.strs) < maxManagedStrings {
		in.strs[s] = s
	}
	return s
}

// podSpecs shares the Pod template spec among cached Sandboxes that
// repeat one: those made from one template (the template-ref-hash label,
// in one namespace: a warm pool's members and its claims' Sandboxes), and
// Sandboxes made without a template whose containers (names and images)
// and runtime class match, in one namespace (a client that creates many
// alike). A decoder gives each its own containers, ports, resources and
// strings. A Sandbox whose spec equals the one held for its key gets that
// spec's contents (a shallow copy: the inner slices, maps and strings are
// one copy); one that differs (a claim's own environment, a template
// changed since, another environment) is held in its place.
//
// As with every cached object, the shared contents are never written: a
// reader that changes a Sandbox changes a deep copy.
type podSpecs struct {
	mu    sync.Mutex
	byKey map[string]*corev1.PodSpec
}

// maxPodSpecs bounds the specs a podSpecs holds (one per template and
// namespace, one per kind of Sandbox made without a template); past the
// bound, Sandboxes of other keys are left as they are.
const maxPodSpecs = 1024

func newPodSpecs() *podSpecs { return &podSpecs{byKey: map[string]*corev1.PodSpec{}} }

// share gives sb the held spec of its key when equal.
func (p *podSpecs) share(sb *sandboxv1beta1.Sandbox) {
	spec := &sb.Spec.PodTemplate.Spec
	key := specKey(sb.Namespace, sb.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash], spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	held, ok := p.byKey[key]
	switch {
	case ok && apiequality.Semantic.DeepEqual(held, spec):
		*spec = *held
	case ok || len(p.byKey) < maxPodSpecs:
		c := *spec
		p.byKey[key] = &c
	}
}

// specKey is where podSpecs holds a Sandbox's spec: by namespace and
// template hash, or for a Sandbox made without a template by namespace,
// runtime class and its containers' names and images (equality is checked
// on the whole spec before anything is shared).
func specKey(namespace, templateHash string, spec *corev1.PodSpec) string {
	if templateHash != "" {
		return namespace + "/" + templateHash
	}
	var b strings.Builder
	b.WriteString(namespace)
	b.WriteString("//")
	if spec.RuntimeClassName != nil {
		b.WriteString(*spec.RuntimeClassName)
	}
	for _, c := range spec.Containers {
		b.WriteByte(0)
		b.WriteString(c.Name)
		b.WriteByte(0)
		b.WriteString(c.Image)
	}
	return b.String()
}
