package policy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// memoSize bounds the verdicts a set remembers; when it is full they are
// all forgotten (a set judges a handful of distinct shapes of object: one
// per template and kind, in the controller).
const memoSize = 1024

// memo remembers a set's decisions by what its policies can observe of an
// object (reads.project), so that objects alike in all they read, such as
// the Pods of one template's Sandboxes, whose names, owners and label values
// differ, are judged once. It is the set's only mutable part, and safe for
// concurrent use; a reload makes a new set, and a new memo.
type memo struct {
	reads *reads
	mu    sync.Mutex
	seen  map[[sha256.Size]byte][]Decision
	// hits and misses count lookups (tests and benchmarks read them).
	hits, misses atomic.Uint64
}

func newMemo(r *reads) *memo {
	if r.all {
		return nil // every object is its own: nothing to share
	}
	return &memo{reads: r, seen: map[[sha256.Size]byte][]Decision{}}
}

// key identifies the decisions of s on o under ctx: the resource, the
// operation, the namespace, the name when the policies read it, the bundle
// modes in force, and the projections of the object and the old object.
// ok is false when o cannot be keyed (it is then judged each time).
func (m *memo) key(ctx context.Context, s *Set, o Object, op admissionregistrationv1.OperationType) (k [sha256.Size]byte, ok bool) {
	if m == nil {
		return k, false
	}
	name := ""
	if m.reads.name {
		name = o.Object.GetName()
	}
	modes := "-"
	if ms, ok := ctx.Value(modesKey{}).(Modes); ok {
		modes = ms.String()
	}
	obj, err := json.Marshal(m.reads.project(o.Object.Object))
	if err != nil {
		return k, false
	}
	old := []byte("null")
	if o.OldObject != nil {
		if old, err = json.Marshal(m.reads.project(o.OldObject.Object)); err != nil {
			return k, false
		}
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%q\x00%s\x00%s\x00%s", o.GVR, o.Object.GroupVersionKind(), op,
		o.Object.GetNamespace(), name, modes, s.defaults.String(), obj, old)
	h.Sum(k[:0])
	return k, true
}

// get returns the decisions remembered under k, as judged of an object
// named what.
func (m *memo) get(k [sha256.Size]byte, what string) ([]Decision, bool) {
	m.mu.Lock()
	ds, ok := m.seen[k]
	m.mu.Unlock()
	if !ok {
		m.misses.Add(1)
		return nil, false
	}
	m.hits.Add(1)
	if ds == nil {
		return nil, true
	}
	out := make([]Decision, len(ds))
	for i, d := range ds {
		d.Object = what
		out[i] = d
	}
	return out, true
}

// put remembers ds under k.
func (m *memo) put(k [sha256.Size]byte, ds []Decision) {
	var kept []Decision
	if ds != nil {
		kept = append([]Decision{}, ds...)
	}
	m.mu.Lock()
	if len(m.seen) >= memoSize {
		clear(m.seen)
	}
	m.seen[k] = kept
	m.mu.Unlock()
}
