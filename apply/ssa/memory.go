package ssa

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Memo remembers one value of type V per key K, each for one object (by
// its UID). The cache lags behind our own writes: a memory of what we wrote
// is how a writer tells "the cache has not shown my write yet" from "this
// needs writing", without a request. A value belongs to one object: a
// namesake (the object deleted and made again under its name) is never
// confused with it. Each use keeps its own Memo, with its own key and value
// types, so nothing remembered needs a type assertion to be read. The zero
// value is ready to use; it is safe for concurrent use.
//
// A Go map never gives back the room it grew to, so a memo that held
// thousands of values (a wave of writes, or of objects since deleted)
// would keep that room for good: once it holds a quarter of the most it
// held (and that was more than shrinkFrom), Forget and Sweep move what is
// left into a map of its size.
type Memo[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]memoEntry[V]
	// most is the most values m held since it was made.
	most int
}

// shrinkFrom is the least a memo must have held for its map to be remade
// smaller: below it, the room is not worth the copy.
const shrinkFrom = 256

type memoEntry[V any] struct {
	uid types.UID
	v   V
}

// Recall returns the value under k for the object with uid. A value of
// another object under k is not returned. With an empty uid (the caller does
// not know the object: the cache does not show it yet) any value under k is.
func (m *Memo[K, V]) Recall(k K, uid types.UID) (V, bool) {
	m.mu.RLock()
	e, ok := m.m[k]
	m.mu.RUnlock()
	if !ok {
		var zero V
		return zero, false
	}
	if uid != "" && e.uid != uid {
		var zero V
		return zero, false
	}
	return e.v, true
}

// RecallWithUID returns the value under k whatever object it belongs to,
// and that object's UID.
func (m *Memo[K, V]) RecallWithUID(k K) (V, types.UID, bool) {
	m.mu.RLock()
	e, ok := m.m[k]
	m.mu.RUnlock()
	if !ok {
		var zero V
		return zero, "", false
	}
	return e.v, e.uid, true
}

// Remember records v under k for the object with uid (empty when the writer
// does not know it), in place of what was there, which it returns (whatever
// object that was about).
func (m *Memo[K, V]) Remember(k K, uid types.UID, v V) (previous V, had bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[K]memoEntry[V])
	}
	old, had := m.m[k]
	m.m[k] = memoEntry[V]{uid: uid, v: v}
	m.most = max(m.most, len(m.m))
	return old.v, had
}

// Change replaces the value under k with what change makes of it (had
// says there was one), for the object with uid, in one step: a value
// remembered meanwhile by another caller is not lost.
func (m *Memo[K, V]) Change(k K, uid types.UID, change func(v V, had bool) V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[K]memoEntry[V])
	}
	old, had := m.m[k]
	m.m[k] = memoEntry[V]{uid: uid, v: change(old.v, had)}
	m.most = max(m.most, len(m.m))
}

// Forget drops the values under keys: the objects are gone.
func (m *Memo[K, V]) Forget(keys ...K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.m, k)
	}
	m.shrink()
}

// ForgetIf drops the value under k if stale says it is: checked and
// dropped at once, so a value remembered meanwhile is not lost.
func (m *Memo[K, V]) ForgetIf(k K, stale func(V) bool) {
	m.mu.RLock()
	e, ok := m.m[k]
	m.mu.RUnlock()
	if !ok || !stale(e.v) {
		return // the common case, under the read lock alone
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[k]; ok && stale(e.v) {
		delete(m.m, k)
		m.shrink()
	}
}

// shrink remakes m at the size of what it holds once that is a quarter of
// the most it held. Called with mu held for writing.
func (m *Memo[K, V]) shrink() {
	if m.most <= shrinkFrom || len(m.m) > m.most/4 {
		return
	}
	kept := make(map[K]memoEntry[V], len(m.m))
	for k, e := range m.m {
		kept[k] = e
	}
	m.m, m.most = kept, len(kept)
}

// Sweep drops the values stale says are, so that a memo whose values only
// matter for moments stays bounded by the objects written recently. It
// returns how many it dropped.
func (m *Memo[K, V]) Sweep(stale func(V) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, e := range m.m {
		if stale(e.v) {
			delete(m.m, k)
			n++
		}
	}
	m.shrink()
	return n
}

// Len counts the values.
func (m *Memo[K, V]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}

// Count counts the values whose keys match.
func (m *Memo[K, V]) Count(match func(K) bool) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for k := range m.m {
		if match(k) {
			n++
		}
	}
	return n
}

// IntentOf is the digest of what is about to be written (an apply
// configuration, a status, a value), to remember what was written by. Take
// it before sending: the client writes the server's response into an apply
// configuration. It is Fingerprint's digest, taken from the JSON itself
// (every plan step takes one; no copies of the JSON as a string).
func IntentOf(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return string(sum[:16])
}

// Fingerprint is the JSON of an apply configuration; take it before sending,
// as the client writes the server's response into the configuration.
func Fingerprint(ac any) string {
	b, _ := json.Marshal(ac)
	return string(b)
}

// digest keeps remembered values small.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return string(sum[:16])
}
