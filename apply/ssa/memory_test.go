package ssa

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMemoKeyedByUID(t *testing.T) {
	type written struct {
		intent, rv string
	}
	var m Memo[types.NamespacedName, written]
	k := types.NamespacedName{Namespace: "ns", Name: "box"}
	running := IntentOf(map[string]string{"phase": "Running"})
	m.Remember(k, "old", written{intent: running, rv: "7"})

	// A namesake (deleted and made again under the name) is not the
	// object the value is about.
	if _, ok := m.Recall(k, "new"); ok {
		t.Error("a value of the old object was recalled for its namesake")
	}
	// Without a UID (the object is not in the cache yet), the value is.
	if v, uid, ok := m.RecallWithUID(k); !ok || uid != "old" || v.rv != "7" {
		t.Errorf("recall without a uid = %+v, %q, %v", v, uid, ok)
	}
	if v, ok := m.Recall(k, ""); !ok || v.intent != running {
		t.Errorf("recall with an empty uid = %+v, %v", v, ok)
	}
	// The same object: the intent and the resourceVersion our write made.
	if v, ok := m.Recall(k, "old"); !ok || v.rv != "7" {
		t.Errorf("recall = %+v, %v; want resourceVersion 7", v, ok)
	}
	// Another object is another key.
	if _, ok := m.Recall(types.NamespacedName{Namespace: "ns", Name: "other"}, "old"); ok {
		t.Error("a value under another key was recalled")
	}

	// Another object of the name takes its place.
	m.Remember(k, "new", written{rv: "9"})
	if v, ok := m.Recall(k, "new"); !ok || v.rv != "9" {
		t.Errorf("the namesake's value: %+v, %v", v, ok)
	}
	if _, ok := m.Recall(k, "old"); ok {
		t.Error("the old object's value outlived its namesake's write")
	}
	prev, had := m.Remember(k, "newer", written{})
	if !had || prev.rv != "9" {
		t.Errorf("Remember returned %+v, %v; want the namesake's value", prev, had)
	}
	m.Forget(k)
	if _, ok := m.Recall(k, ""); ok || m.Len() != 0 {
		t.Errorf("Forget left %d values", m.Len())
	}
}

func TestMemoSweep(t *testing.T) {
	var m Memo[string, time.Time]
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m.Remember("old", "", now.Add(-2*time.Minute))
	m.Remember("recent", "", now.Add(-time.Second))
	if n := m.Sweep(func(at time.Time) bool { return at.Before(now.Add(-time.Minute)) }); n != 1 {
		t.Errorf("swept %d, want 1", n)
	}
	if _, ok := m.Recall("old", ""); ok {
		t.Error("an old value survived the sweep")
	}
	if _, ok := m.Recall("recent", ""); !ok || m.Len() != 1 {
		t.Error("a recent value was swept")
	}
}

// The engine's memory of writes is swept as it writes: by 1024 applies,
// what was written over a minute ago is gone.
func TestEngineSweepsWrites(t *testing.T) {
	e := New(nil, "m", "s")
	old := e.statusKey("Pod", "ns", "old")
	e.written.Remember(old, "", Write{At: time.Now().Add(-2 * time.Minute)})
	k := e.statusKey("Pod", "ns", "box")
	e.applies.Store(1024)
	e.noteWrite(k, "", false, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "5"}}, "{}")
	if _, ok := e.LastStatusWrite("Pod", "ns", "old"); ok {
		t.Error("a write over a minute old was not swept")
	}
	w, ok := e.LastStatusWrite("Pod", "ns", "box")
	if !ok || w.UID != "u" || w.ResourceVersion != "5" || w.Created {
		t.Errorf("last write = %+v, %v", w, ok)
	}
	// The same resourceVersion again: the server changed nothing.
	e.noteWrite(k, "", false, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "5"}}, "{}")
	if e.Stats().NoOps != 1 {
		t.Errorf("no-ops = %d, want 1", e.Stats().NoOps)
	}
}

// Forgetting an object drops what every manager of ours wrote of it and
// of its status, and only that: the engine's memory of a deleted object
// does not accumulate.
func TestEngineForgetsObjectAndStatus(t *testing.T) {
	e := New(nil, "m", "s")
	keys := []writeKey{
		objectKey("Sandbox", "m", "ns", "box"),
		objectKey("Sandbox", e.AnnotationManager(), "ns", "box"),
		e.statusKey("Sandbox", "ns", "box"),
	}
	other := objectKey("Sandbox", "m", "ns", "other")
	for _, k := range append(keys, other) {
		e.written.Remember(k, "u", Write{At: time.Now()})
		e.owned.Remember(k, "u", ownedAs{entry: "e"})
		e.extracted.Remember(k, "u", extraction{entry: "e"})
	}
	e.Forget("Sandbox", "ns", "box")
	for name, n := range map[string]int{"written": e.written.Len(), "owned": e.owned.Len(), "extracted": e.extracted.Len()} {
		if n != 1 {
			t.Errorf("%s holds %d after Forget, want 1 (the other Sandbox)", name, n)
		}
	}
	if _, ok := e.written.Recall(other, "u"); !ok {
		t.Error("Forget dropped another object's write")
	}
}

// A memo that held many values and then lost most of them is remade at
// the size of what is left (a Go map keeps the room it grew to), and keeps
// every value it still holds.
func TestMemoShrinksOnceMostAreGone(t *testing.T) {
	var m Memo[int, int]
	for i := range 4 * shrinkFrom {
		m.Remember(i, "", i)
	}
	if m.most != 4*shrinkFrom {
		t.Fatalf("most = %d, want %d", m.most, 4*shrinkFrom)
	}
	for i := range 2 * shrinkFrom {
		m.Forget(i)
	}
	if m.most != 4*shrinkFrom {
		t.Errorf("remade at half the values held: most = %d", m.most)
	}
	// The sweep leaves a quarter: remade.
	m.Sweep(func(v int) bool { return v < 3*shrinkFrom })
	if m.most != shrinkFrom || m.Len() != shrinkFrom {
		t.Errorf("after the sweep most = %d, len = %d; want %d both", m.most, m.Len(), shrinkFrom)
	}
	for i := 3 * shrinkFrom; i < 4*shrinkFrom; i++ {
		if v, ok := m.Recall(i, ""); !ok || v != i {
			t.Fatalf("value %d lost in the remake: %v, %v", i, v, ok)
		}
	}
	// ForgetIf drops only a value that is still the stale one.
	m.ForgetIf(3*shrinkFrom, func(v int) bool { return v != 3*shrinkFrom })
	if _, ok := m.Recall(3*shrinkFrom, ""); !ok {
		t.Error("ForgetIf dropped a value stale did not choose")
	}
	m.ForgetIf(3*shrinkFrom, func(v int) bool { return v == 3*shrinkFrom })
	if _, ok := m.Recall(3*shrinkFrom, ""); ok {
		t.Error("ForgetIf kept a value stale chose")
	}
}

// What the engine remembers of a write goes once the cache shows it: the
// object at or past the resourceVersion the write gave it. Until then (the
// cache older, or another object of the name) it stays.
func TestEngineDropsWritesTheCacheShows(t *testing.T) {
	e := New(nil, "m", "s")
	k := e.statusKey("Sandbox", "ns", "box")
	e.noteWrite(k, "4", false, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "7"}}, "{}")
	live := func(uid, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "box", UID: types.UID(uid), ResourceVersion: rv}}
	}
	e.Seen("Sandbox", live("u", "6"))
	if _, ok := e.LastStatusWrite("Sandbox", "ns", "box"); !ok {
		t.Fatal("a write the cache has not shown was dropped")
	}
	e.Seen("Sandbox", live("other", "9"))
	if _, ok := e.LastStatusWrite("Sandbox", "ns", "box"); !ok {
		t.Fatal("a namesake's look dropped the write")
	}
	e.Seen("Sandbox", live("u", "7"))
	if _, ok := e.LastStatusWrite("Sandbox", "ns", "box"); ok {
		t.Error("a write the cache shows is still remembered")
	}
	// A write the server found changed nothing: the object as we saw it
	// already had the resourceVersion returned.
	if e.Stats().NoOps != 0 {
		t.Fatalf("no-ops = %d before any", e.Stats().NoOps)
	}
	e.noteWrite(k, "7", false, map[string]any{"metadata": map[string]string{"uid": "u", "resourceVersion": "7"}}, "{}")
	if e.Stats().NoOps != 1 {
		t.Errorf("no-ops = %d, want 1", e.Stats().NoOps)
	}
}

// TestIntentIsTheFingerprintsDigest: IntentOf digests the JSON itself,
// as digest(Fingerprint) would.
func TestIntentIsTheFingerprintsDigest(t *testing.T) {
	for _, v := range []any{map[string]string{"phase": "Running"}, []int{1, 2}, "x", nil} {
		if IntentOf(v) != digest(Fingerprint(v)) {
			t.Errorf("IntentOf(%v) is not the digest of its fingerprint", v)
		}
	}
	if IntentOf("a") == IntentOf("b") {
		t.Error("two values share an intent")
	}
}
