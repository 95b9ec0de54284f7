package controllers

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
