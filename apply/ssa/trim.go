package ssa

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// trimmedFor returns what an extraction of a manager's fields, by its Apply
// entry of live (applyEntry), needs of live: a shallow copy without the
// top-level fields (spec, status, ...) its entry does not reach, and with
// that entry as its only managedFields. Extraction converts the whole
// object into a typed value before it keeps the manager's fields; for the
// pod-name annotation that meant the Sandbox's whole Pod template, for a
// status its spec, for a Pod its status. What is dropped is outside the
// manager's field set, so the extraction is the same (TestTrimmedExtraction).
// With no entry (nil) the copy has no top-level field and no
// managedFields: an extraction then finds nothing the manager owns, as it
// would of the object, whose whole conversion it skips (a Sandbox's first
// pod-name annotation, its status before our first write of it).
// live itself is returned when there is nothing to drop or it is not a
// pointer to a struct; nothing live holds is changed.
func trimmedFor[O client.Object](live O, entry *metav1.ManagedFieldsEntry) O {
	reached, ok := reachedBy(entry)
	v := reflect.ValueOf(live)
	if !ok || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return live
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	for _, f := range topFields(v.Elem().Type()) {
		if !slices.Contains(reached, "f:"+f.name) {
			c.Elem().Field(f.index).SetZero()
		}
	}
	out, ok := c.Interface().(O)
	if !ok {
		return live
	}
	var kept []metav1.ManagedFieldsEntry
	if entry != nil {
		kept = []metav1.ManagedFieldsEntry{*entry}
	}
	out.SetManagedFields(kept)
	return out
}

// reachedBy is the top-level keys of entry's field set (topKeys): none
// for no entry, and false when its field set cannot be read.
func reachedBy(entry *metav1.ManagedFieldsEntry) ([]string, bool) {
	switch {
	case entry == nil:
		return nil, true
	case entry.FieldsV1 == nil:
		return nil, false
	}
	return topKeys(entry.FieldsV1.GetRawString())
}

// topField is a top-level field of an object's type that a manager may or
// may not reach: its index and JSON name.
type topField struct {
	index int
	name  string
}

// topFieldsOf caches topFields per type.
var topFieldsOf sync.Map // reflect.Type -> []topField

// topFields lists the fields of an object's struct type besides its type
// and object metadata (spec, status, data, ...), by JSON name.
func topFields(t reflect.Type) []topField {
	if fs, ok := topFieldsOf.Load(t); ok {
		return fs.([]topField)
	}
	var fs []topField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" || name == "metadata" {
			continue
		}
		fs = append(fs, topField{index: i, name: name})
	}
	topFieldsOf.Store(t, fs)
	return fs
}

// topKeys returns the keys of the top-level object of a managedFields
// entry's field set (FieldsV1 JSON: "f:metadata", "f:spec", ...), as they
// are written (a key with an escape is kept escaped, and matches no field
// name), and false when raw is not such an object. Every value in a field
// set is an object, so a string at the top level is a key.
func topKeys(raw string) ([]string, bool) {
	if !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return nil, false
	}
	var keys []string
	depth, start := 0, -1
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case start >= 0:
			switch c {
			case '\\':
				i++ // the escaped byte
			case '"':
				if depth == 1 {
					keys = append(keys, raw[start:i])
				}
				start = -1
			}
		case c == '"':
			start = i + 1
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth < 0 {
				return nil, false
			}
		}
	}
	return keys, depth == 0 && start < 0
}
