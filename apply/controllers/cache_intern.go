package controllers

import (
	"bytes"
	"hash/maphash"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldsInterner shares equal managedFields among cached objects. The
// fields an apply owns name keys, not values (f:metadata, f:labels, a
// container by its name), so the entry our field manager holds on every
// Pod made from one template is the same bytes, as is the status
// manager's on every Sandbox: 5000 Sandboxes held ~9.5 MB of such copies
// (heap profile with 5000 Running). Each distinct content is kept once,
// as long as some cached object refers to it: the table holds it weakly
// and drops it when the last object holding it is collected.
//
// The shared bytes must never be written: cached objects are read-only
// (a reader that changes one gets a deep copy, whose FieldsV1 bytes are
// its own).
type fieldsInterner struct {
	mu   sync.Mutex
	seed maphash.Seed
	// byHash holds, by hash of their content, the canonical copies in use.
	byHash map[uint64][]weakBytes
	// strs are the short strings of managedFields entries (str).
	strs map[string]string
}

// weakBytes is a canonical copy held weakly: its first byte's address and
// its length.
type weakBytes struct {
	first weak.Pointer[byte]
	n     int
}

func newFieldsInterner() *fieldsInterner {
	return &fieldsInterner{seed: maphash.MakeSeed(), byHash: map[uint64][]weakBytes{}, strs: map[string]string{}}
}

// bytes returns the canonical copy of b: one held already with the same
// content, or a fresh copy of b, which becomes the canonical one.
func (in *fieldsInterner) bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	h := maphash.Bytes(in.seed, b)
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, w := range in.byHash[h] {
		if p := w.first.Value(); p != nil && w.n == len(b) {
			if s := unsafe.Slice(p, w.n); bytes.Equal(s, b) {
				return s
			}
		}
	}
	c := make([]byte, len(b))
	copy(c, b)
	in.byHash[h] = append(in.byHash[h], weakBytes{first: weak.Make(&c[0]), n: len(c)})
	runtime.AddCleanup(&c[0], in.prune, h)
	return c
}

// prune drops the copies of hash h no object holds any more.
func (in *fieldsInterner) prune(h uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	kept := in.byHash[h][:0]
	for _, w := range in.byHash[h] {
		if w.first.Value() != nil {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(in.byHash, h)
		return
	}
	in.byHash[h] = kept
}

// size is the number of canonical copies the table holds (live or not yet
// pruned).
func (in *fieldsInterner) size() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, ws := range in.byHash {
		n += len(ws)
	}
	return n
}

// entries shares the FieldsV1 bytes and the short strings (manager,
// operation, API version, fields type, subresource) of managedFields
// entries in place.
func (in *fieldsInterner) entries(entries []metav1.ManagedFieldsEntry) {
	for i := range entries {
		e := &entries[i]
		e.Manager, e.APIVersion = in.str(e.Manager), in.str(e.APIVersion)
		e.Operation = metav1.ManagedFieldsOperationType(in.str(string(e.Operation)))
		e.FieldsType, e.Subresource = in.str(e.FieldsType), in.str(e.Subresource)
		if e.FieldsV1 != nil {
			e.FieldsV1.Raw = in.bytes(e.FieldsV1.Raw)
		}
	}
}

// maxStrings bounds the short strings a fieldsInterner keeps: managers,
// operations, API versions and such are a handful in any cluster; past
// the bound, strings are left as they are.
const maxStrings = 256

// str returns the canonical copy of a short string that many objects
// repeat, held for as long as the interner is.
func (in *fieldsInterner) str(s string) string {
	if s == "" {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.strs[s]; ok {
		return c
	}
	if len(in.strs) < maxStrings {
		in.strs[s] = s
	}
	return s
}
