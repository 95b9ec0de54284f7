package ssa

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memory remembers what this process last wrote, one Record per object.
// The cache lags behind our own writes: a memory of what we wrote is how a
// writer tells "the cache has not shown my write yet" from "this needs
// writing", without a request. A Record belongs to one object, by its UID:
// a namesake (the object deleted and made again under its name) is never
// confused with it. The engine keeps one for its requests (swept: entries
// only matter for moments), the reconcilers one each for what they wrote
// and reported (status, annotations, events; forgotten with the object).
// The zero value is ready to use; it is safe for concurrent use.
type Memory struct {
	m sync.Map // Key -> Record
}

// Key names what was written: the object's kind, or the part of it that
// is written on its own (SandboxStatus, for a Sandbox's status), its
// namespace and its name.
type Key struct {
	Kind, Namespace, Name string
}

// KeyOf is the Key of kind for an object.
func KeyOf(kind string, o client.Object) Key {
	return Key{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

func (k Key) String() string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// Record is what a Memory holds about one write.
type Record struct {
	// UID is the object's; empty when the writer did not know it.
	UID types.UID
	// ResourceVersion is the one our write produced, empty when unknown.
	ResourceVersion string
	// Intent says what was written: a digest of it (IntentOf), or a short
	// value compared as is.
	Intent string
	// At is when it was written.
	At time.Time
	// Created is set when the write created the object.
	Created bool
	// Owned identifies our field manager's managedFields entry under which
	// what we own was found equal to Intent (the engine's diff).
	Owned string
	// State is what the writer keeps with the write (the status as it
	// reported it, say), nil when nothing.
	State any
}

// Recall returns the record under k for the object with uid. A record of
// another object of that name is not returned. With an empty uid (the
// caller does not know the object: the cache does not show it yet) any
// record under k is.
func (m *Memory) Recall(k Key, uid types.UID) (Record, bool) {
	v, ok := m.m.Load(k)
	if !ok {
		return Record{}, false
	}
	r := v.(Record)
	if uid != "" && r.UID != uid {
		return Record{}, false
	}
	return r, true
}

// Holds reports that the last write recorded under k for the object with
// uid carried intent.
func (m *Memory) Holds(k Key, uid types.UID, intent string) bool {
	r, ok := m.Recall(k, uid)
	return ok && r.Intent == intent
}

// Remember records r under k, in place of what was there, which it
// returns (whatever object that was about).
func (m *Memory) Remember(k Key, r Record) (previous Record, had bool) {
	v, had := m.m.Swap(k, r)
	if had {
		previous = v.(Record)
	}
	return previous, had
}

// Forget drops the records under keys: the objects are gone.
func (m *Memory) Forget(keys ...Key) {
	for _, k := range keys {
		m.m.Delete(k)
	}
}

// Sweep drops the records written before a time, so that a memory whose
// records only matter for moments stays bounded by the objects written
// recently. It returns how many it dropped.
func (m *Memory) Sweep(before time.Time) int {
	n := 0
	m.m.Range(func(k, v any) bool {
		if v.(Record).At.Before(before) {
			m.m.Delete(k)
			n++
		}
		return true
	})
	return n
}

// Len counts the records.
func (m *Memory) Len() int {
	n := 0
	m.m.Range(func(any, any) bool { n++; return true })
	return n
}

// IntentOf is the digest of what is about to be written (an apply
// configuration, a status, a value), for Record.Intent. Take it before
// sending: the client writes the server's response into an apply
// configuration.
func IntentOf(v any) string { return digest(Fingerprint(v)) }

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
