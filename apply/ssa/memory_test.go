package ssa

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMemoryKeyedByUID(t *testing.T) {
	var m Memory
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: "old"}}
	k := KeyOf("PodStatus", pod)
	if k != (Key{Kind: "PodStatus", Namespace: "ns", Name: "box"}) || k.String() != "PodStatus/ns/box" {
		t.Fatalf("KeyOf = %v", k)
	}
	m.Remember(k, Record{UID: "old", Intent: IntentOf(map[string]string{"phase": "Running"}), ResourceVersion: "7"})

	// A namesake (deleted and made again under the name) is not the
	// object the record is about.
	if _, ok := m.Recall(k, "new"); ok {
		t.Error("a record of the old object was recalled for its namesake")
	}
	if m.Holds(k, "new", IntentOf(map[string]string{"phase": "Running"})) {
		t.Error("the namesake holds what was written to the old object")
	}
	// Without a UID (the object is not in the cache yet), the record is.
	if r, ok := m.Recall(k, ""); !ok || r.UID != "old" {
		t.Errorf("recall without a uid = %+v, %v", r, ok)
	}
	// The same object: the intent and the resourceVersion our write made.
	if r, ok := m.Recall(k, "old"); !ok || r.ResourceVersion != "7" {
		t.Errorf("recall = %+v, %v; want resourceVersion 7", r, ok)
	}
	if !m.Holds(k, "old", IntentOf(map[string]string{"phase": "Running"})) {
		t.Error("the intent written is not held")
	}
	if m.Holds(k, "old", IntentOf(map[string]string{"phase": "Pending"})) {
		t.Error("another intent is held")
	}
	// Another part of the same object is another record.
	if _, ok := m.Recall(KeyOf("Pod", pod), "old"); ok {
		t.Error("a record under another kind was recalled")
	}

	// Another object of the name takes its place.
	m.Remember(k, Record{UID: "new", ResourceVersion: "9"})
	if r, ok := m.Recall(k, "new"); !ok || r.ResourceVersion != "9" {
		t.Errorf("the namesake's record: %+v, %v", r, ok)
	}
	if _, ok := m.Recall(k, "old"); ok {
		t.Error("the old object's record outlived its namesake's write")
	}
	prev, had := m.Remember(k, Record{UID: "newer"})
	if !had || prev.UID != "new" {
		t.Errorf("Remember returned %+v, %v; want the namesake's record", prev, had)
	}
	m.Forget(k)
	if _, ok := m.Recall(k, ""); ok || m.Len() != 0 {
		t.Errorf("Forget left %d records", m.Len())
	}
}

func TestMemorySweep(t *testing.T) {
	var m Memory
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m.Remember(Key{"Pod", "ns", "old"}, Record{At: now.Add(-2 * time.Minute)})
	m.Remember(Key{"Pod", "ns", "recent"}, Record{At: now.Add(-time.Second)})
	if n := m.Sweep(now.Add(-time.Minute)); n != 1 {
		t.Errorf("swept %d, want 1", n)
	}
	if _, ok := m.Recall(Key{"Pod", "ns", "old"}, ""); ok {
		t.Error("an old record survived the sweep")
	}
	if _, ok := m.Recall(Key{"Pod", "ns", "recent"}, ""); !ok || m.Len() != 1 {
		t.Error("a recent record was swept")
	}
}

// The engine's memory of writes is swept as it writes: by 1024 applies,
// what was written over a minute ago is gone.
func TestEngineSweepsWrites(t *testing.T) {
	e := New(nil, "m", "s")
	old := Change{Kind: "Pod", Namespace: "ns", Name: "old", Action: Configured}
	e.written.Remember(key(old), Record{At: time.Now().Add(-2 * time.Minute)})
	c := Change{Kind: "Pod", Namespace: "ns", Name: "box", Action: Configured}
	e.applies.Store(1024)
	e.noteWrite(c, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "5"}}, "{}")
	if _, ok := e.LastWrite(old); ok {
		t.Error("a write over a minute old was not swept")
	}
	r, ok := e.LastWrite(c)
	if !ok || r.UID != "u" || r.ResourceVersion != "5" || r.Created {
		t.Errorf("last write = %+v, %v", r, ok)
	}
	// The same resourceVersion again: the server changed nothing.
	e.noteWrite(c, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "5"}}, "{}")
	if e.Stats().NoOps != 1 {
		t.Errorf("no-ops = %d, want 1", e.Stats().NoOps)
	}
}
