package ssa

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Extract returns what manager owns of live (through its Apply entry for
// subresource, "" for the object itself), as extract gives it: the
// generated Extract function of the kind (corev1ac.ExtractPod,
// sandboxac.ExtractSandboxStatus, ...).
//
// Extraction converts the whole object into a typed value and walks it: it
// was the largest share of the controller's CPU while Sandboxes were being
// created (one Pod extracted on every reconcile, most of them caused by the
// Pod's own status moving on). Its result is remembered per object, keyed
// by the object's UID and our manager's managedFields entry: the values of
// fields a manager owns cannot change without its entry changing (a writer
// that sets one takes or shares its ownership), so while the entry is the
// same, so is the result. What is remembered is its JSON; every caller gets
// a copy of its own, free to change.
func Extract[O client.Object, AC any](e *Engine, kind string, live O, manager, subresource string, extract func(O, string) (AC, error)) (AC, error) {
	return extractRemembered(e, kind, live, manager, subresource, extract, true)
}

// extractRemembered is Extract; remember false uses a remembered
// extraction but does not remember a new one. The engine's own comparisons
// (ownsDesired) extract so: once what we own is found equal to what we
// want, owned answers without extraction until the object changes, so
// their extractions are rarely asked for again, and remembering each
// object's cost memory (about half of what the engine held per Sandbox).
// A Pod's, which every reconcile reads (Extract), is shared with them.
func extractRemembered[O client.Object, AC any](e *Engine, kind string, live O, manager, subresource string, extract func(O, string) (AC, error), remember bool) (AC, error) {
	began := time.Now()
	k := writeKey{Kind: kind, Manager: manager, Subresource: subresource, Namespace: live.GetNamespace(), Name: live.GetName()}
	applied := applyEntry(live, manager, subresource)
	entry := e.entryKey(k, live, applied)
	if entry == "" {
		// Nothing applied by manager (yet): nothing to remember by, and
		// nothing to extract but the object's name (trimmedFor).
		return extract(trimmedFor(live, applied), manager)
	}
	if r, ok := e.extracted.Recall(k, live.GetUID()); ok && r.entry == entry {
		if out, err := decodeAs[AC](r.json); err == nil {
			e.extractions.hits.Add(1)
			return out, nil
		}
	}
	out, err := extract(trimmedFor(live, applied), manager)
	if err != nil {
		return out, err
	}
	e.extractions.misses.Add(1)
	if !remember || e.sentSince(k, began) {
		// Not asked to, or a write of ours was sent meanwhile: what was
		// made of the object before it stays unremembered.
		return out, nil
	}
	if b, err := json.Marshal(out); err == nil {
		e.extracted.Remember(k, live.GetUID(), extraction{entry: entry, json: b})
	}
	return out, nil
}

// decodeAs decodes JSON into a new value of AC, a pointer to an apply
// configuration.
func decodeAs[AC any](b []byte) (AC, error) {
	var zero AC
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		return zero, fmt.Errorf("extracting into %T: not a pointer", zero)
	}
	v := reflect.New(t.Elem())
	if err := json.Unmarshal(b, v.Interface()); err != nil {
		return zero, err
	}
	return v.Interface().(AC), nil
}

// extraction is what extracted remembers: the JSON of an extraction, and
// the managedFields entry it was made under.
type extraction struct {
	entry string
	json  []byte
}
