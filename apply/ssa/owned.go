package ssa

import (
	"reflect"
	"slices"

	"encoding/json"
	"time"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownsDesired reports whether what our field manager owns of live equals
// desired. Extraction (a structured-merge-diff conversion of the whole
// object) is the expensive part of a reconcile that changes nothing, so its
// positive result is remembered (in owned): the values of fields we own
// cannot change without our managedFields entry changing (another writer
// that sets them takes or shares ownership), so while that entry and
// desired stay the same the answer stays yes.
func (e *Engine) ownsDesired(k writeKey, live client.Object, desired any, extract func() (any, error)) (bool, error) {
	began := time.Now()
	managed := e.entryKey(k, live, applyEntry(live, k.Manager, k.Subresource))
	fp := IntentOf(desired)
	if r, ok := e.owned.Recall(k, live.GetUID()); ok && managed != "" && r.entry == managed && r.intent == fp {
		return true, nil
	}
	dm := objectMetaOf(desired)
	if dm != nil && dm.UID != nil && *dm.UID != live.GetUID() {
		// Meant for another object of this name: never "already so".
		return false, nil
	}
	if managed != "" && e.asSent(k, live, fp) {
		e.owned.Remember(k, live.GetUID(), ownedAs{entry: managed, intent: fp})
		return true, nil
	}
	if dm != nil && metadataDiffers(dm, live) {
		// What we own of live holds live's values, so it cannot equal
		// desired: a claim taking a member (a new controller and labels)
		// needs no extraction of the member's whole spec to find that out.
		return false, nil
	}
	owned, err := extract()
	if err != nil {
		return false, err
	}
	if om := objectMetaOf(owned); dm != nil && om != nil {
		// A UID or resourceVersion in desired is a precondition of the
		// write, not a field anyone owns: extraction never returns them.
		om.UID, om.ResourceVersion = dm.UID, dm.ResourceVersion
	}
	if !apiequality.Semantic.DeepEqual(owned, desired) {
		e.owned.Forget(k)
		return false, nil
	}
	if managed != "" && !e.sentSince(k, began) {
		e.owned.Remember(k, live.GetUID(), ownedAs{entry: managed, intent: fp})
	}
	return true, nil
}

// objectMetaOf is the metadata of a root apply configuration (the
// generated types embed *ObjectMetaApplyConfiguration), nil when it has
// none.
func objectMetaOf(ac any) *metav1ac.ObjectMetaApplyConfiguration {
	v := reflect.ValueOf(ac)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("ObjectMetaApplyConfiguration")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil
	}
	m, _ := f.Interface().(*metav1ac.ObjectMetaApplyConfiguration)
	return m
}

// applyEntry is manager's Apply entry of o's managedFields for
// subresource, nil when it has none.
func applyEntry(o client.Object, manager, subresource string) *metav1.ManagedFieldsEntry {
	fields := o.GetManagedFields()
	for i := range fields {
		if m := &fields[i]; m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == subresource {
			return m
		}
	}
	return nil
}

// entryKey identifies m, k's Apply entry on o (nil when it has none:
// ""), for the memories of extractions and comparisons: its API version,
// time and owned field set.
//
// The entry's time has a resolution of one second, and an atomic field
// (a NetworkPolicy's podSelector, a Service's selector) appears in the
// field set as one field whatever it holds: two writes of ours of such a
// field within one second leave the same entry. So while the entry is
// recent (entryAmbiguous) and a write of ours may not show in o yet
// (settled), o's resourceVersion is part of it too: what was remembered of
// the first write is never taken for the second.
func (e *Engine) entryKey(k writeKey, o client.Object, m *metav1.ManagedFieldsEntry) string {
	if m == nil {
		return ""
	}
	t, rv := "", ""
	if m.Time != nil {
		t = m.Time.UTC().String()
		if time.Since(m.Time.Time) < entryAmbiguous && !e.settled(k, o) {
			rv = o.GetResourceVersion()
		}
	}
	raw := ""
	if m.FieldsV1 != nil {
		raw = m.FieldsV1.GetRawString()
	}
	return digest(m.APIVersion + "|" + t + "|" + raw + "|" + rv)
}

// entryAmbiguous is how long after its time a managed fields entry may
// still change without its time or field set changing: the second of its
// time, plus a margin for the skew between the API server's clock and ours.
const entryAmbiguous = 10 * time.Second

// writeKey names what one of our field managers wrote of an object: its
// kind, the manager, the subresource ("" for the object itself), its
// namespace and name. The engine's memories are keyed by it.
type writeKey struct {
	Kind, Manager, Subresource, Namespace, Name string
}

// objectKey is the key of what manager applies of an object itself.
func objectKey(kind, manager, namespace, name string) writeKey {
	return writeKey{Kind: kind, Manager: manager, Namespace: namespace, Name: name}
}

// statusKey is the key of what the status manager applies of an object's
// status.
func (e *Engine) statusKey(kind, namespace, name string) writeKey {
	return writeKey{Kind: kind, Manager: e.statusManager, Subresource: "status", Namespace: namespace, Name: name}
}

// ownedAs is what owned remembers: the managedFields entry of ours under
// which what we own was found equal to the intent (a digest of the
// desired configuration).
type ownedAs struct{ entry, intent string }

// Write is what the engine remembers of its last write of an object.
type Write struct {
	// UID and ResourceVersion are the object's as the server returned
	// them, empty when unknown.
	UID             types.UID
	ResourceVersion string
	// Intent is a digest of what was sent.
	Intent string
	// At is when it was written.
	At time.Time
	// Created is set when the write created the object.
	Created bool
}

// noteWrite records a write (in written), counting it as a no-op when the
// server returned the resourceVersion of our previous write or seen, that
// of the object as we saw it ("" when we saw none). sent is the
// Fingerprint of what was sent. It returns the resourceVersion the server
// returned.
func (e *Engine) noteWrite(k writeKey, seen string, created bool, response any, sent string) string {
	uid, rv := identity(response)
	w := Write{UID: uid, ResourceVersion: rv, At: time.Now(), Intent: digest(sent), Created: created}
	prev, ok := e.written.Remember(k, uid, w)
	if rv != "" && (rv == seen || ok && prev.ResourceVersion == rv) {
		e.noops.Add(1)
	}
	if e.applies.Load()%1024 == 0 {
		// Writes older than a minute are of no use (CreateExpectation,
		// the no-op count): memory stays bounded by the objects written
		// in the last minute.
		before := w.At.Add(-time.Minute)
		e.written.Sweep(func(w Write) bool { return w.At.Before(before) })
		e.sweepAttempts(w.At)
	}
	return rv
}

// aheadOfCache reports that live, as the cache shows it, is older than our
// last write under k, which sent what desired asks for (sent is its
// Fingerprint): the write is made and the cache has not shown it yet, so
// sending it again would change nothing. Whatever changed the object after
// our write has a newer resourceVersion: once the cache shows it, live is
// no longer older and the write is judged again. Never for a write guarded
// by a resourceVersion (the guard is the caller's decision), nor when the
// resourceVersions cannot be compared, nor past writeAhead.
func (e *Engine) aheadOfCache(k writeKey, live client.Object, desired any, sent string) bool {
	if dm := objectMetaOf(desired); dm != nil && dm.ResourceVersion != nil {
		return false
	}
	uid := live.GetUID()
	w, ok := e.written.Recall(k, uid)
	if !ok || uid == "" || w.Intent != digest(sent) || time.Since(w.At) > writeAhead {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(live.GetResourceVersion(), w.ResourceVersion)
	return err == nil && c < 0
}

// Seen tells the engine the cache shows live, an object of kind: what each
// of our managers wrote of it and of its status that live shows is
// forgotten (see dropShown). A reconciler calls it with the object it
// reconciles; Apply does for the objects it writes.
func (e *Engine) Seen(kind string, live client.Object) {
	ns, name := live.GetNamespace(), live.GetName()
	e.dropShown(objectKey(kind, e.fieldManager, ns, name), live)
	e.dropShown(objectKey(kind, e.AnnotationManager(), ns, name), live)
	e.dropShown(e.statusKey(kind, ns, name), live)
}

// dropShown forgets our last write under k once the cache shows it: live
// is the object written, at or past the resourceVersion the write gave it.
// Every use of a remembered write (aheadOfCache, recentlyCreated,
// LastStatusWrite, the no-op count) is over by then, so what is
// remembered is the writes in flight, not every object written in the
// last minute; the sweep takes the writes of objects not looked at again.
func (e *Engine) dropShown(k writeKey, live client.Object) {
	uid := live.GetUID()
	w, ok := e.written.Recall(k, uid)
	if !ok || uid == "" {
		return
	}
	if c, err := resourceversion.CompareResourceVersion(live.GetResourceVersion(), w.ResourceVersion); err != nil || c < 0 {
		return
	}
	e.written.ForgetIf(k, func(now Write) bool { return now == w })
}

// writeAhead bounds how long a write of ours can stand for a cache that has
// not shown it (aheadOfCache): writes are remembered about as long.
const writeAhead = time.Minute

// LastStatusWrite is what the engine remembers of its last write of the
// status of an object of kind (ApplyStatus): until the cache shows it (see
// dropShown) or a sweep takes it (past a minute), its resourceVersion and
// UID as the server returned them.
func (e *Engine) LastStatusWrite(kind, namespace, name string) (Write, bool) {
	return e.written.Recall(e.statusKey(kind, namespace, name), "")
}

// recentlyCreated reports that we created this object, as desired now,
// within CreateExpectation.
func (e *Engine) recentlyCreated(k writeKey, desired any) bool {
	w, ok := e.written.Recall(k, "")
	return ok && w.Created && time.Since(w.At) < CreateExpectation && w.Intent == IntentOf(desired)
}

// Forget drops what the engine remembers about an object (it was deleted):
// what each of our managers wrote of it and of its status.
func (e *Engine) Forget(kind, namespace, name string) {
	for _, m := range []string{e.fieldManager, e.statusManager, e.AnnotationManager()} {
		for _, sub := range []string{"", "status"} {
			k := writeKey{Kind: kind, Manager: m, Subresource: sub, Namespace: namespace, Name: name}
			e.written.Forget(k)
			e.owned.Forget(k)
			e.extracted.Forget(k)
			e.attempts.Forget(k)
		}
	}
}

// Remembered counts what the engine remembers of objects in a namespace:
// once they are gone and forgotten (and their writes a minute old), none.
func (e *Engine) Remembered(namespace string) int {
	in := func(k writeKey) bool { return k.Namespace == namespace }
	return e.written.Count(in) + e.owned.Count(in) + e.extracted.Count(in) + e.attempts.Count(in)
}

// InFlight counts the writes of objects in a namespace the engine still
// remembers: those the cache has not shown yet (see Seen), and those of
// objects not looked at since, until a sweep takes them (past a minute).
func (e *Engine) InFlight(namespace string) int {
	return e.written.Count(func(k writeKey) bool { return k.Namespace == namespace })
}

// identity reads the UID and resourceVersion the server returned into an
// apply configuration (only on the write path, after a request).
func identity(ac any) (types.UID, string) {
	b, err := json.Marshal(ac)
	if err != nil {
		return "", ""
	}
	var meta struct {
		Metadata struct {
			UID             types.UID `json:"uid"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(b, &meta) != nil {
		return "", ""
	}
	return meta.Metadata.UID, meta.Metadata.ResourceVersion
}

// metadataDiffers reports that desired's metadata sets a label, an
// annotation, an owner reference or a finalizer live does not hold (a
// label or annotation with another value, an owner reference to another
// UID or with another controller flag): what any manager owns of live
// holds live's values, so none owns desired. false means only that
// extraction has to tell.
func metadataDiffers(desired *metav1ac.ObjectMetaApplyConfiguration, live client.Object) bool {
	for _, pair := range []struct{ want, have map[string]string }{
		{desired.Labels, live.GetLabels()}, {desired.Annotations, live.GetAnnotations()},
	} {
		for k, v := range pair.want {
			if have, ok := pair.have[k]; !ok || have != v {
				return true
			}
		}
	}
	refs := live.GetOwnerReferences()
	for _, want := range desired.OwnerReferences {
		if want.UID == nil {
			continue
		}
		i := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == *want.UID })
		if i < 0 || want.Controller != nil && (refs[i].Controller != nil && *refs[i].Controller) != *want.Controller {
			return true
		}
	}
	for _, f := range desired.Finalizers {
		if !slices.Contains(live.GetFinalizers(), f) {
			return true
		}
	}
	return false
}
