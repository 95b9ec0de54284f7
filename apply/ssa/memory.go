package ssa

import (
	"crypto/sha256"
	"encoding/json"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownsDesired reports whether what our field manager owns of live equals
// desired. Extraction (a structured-merge-diff conversion of the whole
// object) is the expensive part of a reconcile that changes nothing, so its
// positive result is remembered: the values of fields we own cannot change
// without our managedFields entry changing (another writer that sets them
// takes or shares ownership), so while that entry and desired stay the same
// the answer stays yes.
func (e *Engine) ownsDesired(c Change, live client.Object, manager, subresource string, desired any, extract func() (any, error)) (bool, error) {
	k := key(c)
	managed := managedEntry(live, manager, subresource)
	fp := digest(Fingerprint(desired))
	if v, ok := e.verified.Load(k); ok {
		if v := v.(verification); managed != "" && v.uid == live.GetUID() && v.managed == managed && v.desired == fp {
			return true, nil
		}
	}
	owned, err := extract()
	if err != nil {
		return false, err
	}
	if !apiequality.Semantic.DeepEqual(owned, desired) {
		e.verified.Delete(k)
		return false, nil
	}
	if managed != "" {
		e.verified.Store(k, verification{uid: live.GetUID(), managed: managed, desired: fp})
	}
	return true, nil
}

// managedEntry identifies our field manager's Apply entry on an object: its
// time and owned field set. Empty when there is none.
func managedEntry(o client.Object, manager, subresource string) string {
	for _, m := range o.GetManagedFields() {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == subresource {
			t := ""
			if m.Time != nil {
				t = m.Time.UTC().String()
			}
			raw := ""
			if m.FieldsV1 != nil {
				raw = m.FieldsV1.GetRawString()
			}
			return digest(m.APIVersion + "|" + t + "|" + raw)
		}
	}
	return ""
}

// digest keeps remembered values small.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return string(sum[:16])
}

// Fingerprint is the JSON of an apply configuration; take it before sending,
// as the client writes the server's response into the configuration.
func Fingerprint(ac any) string {
	b, _ := json.Marshal(ac)
	return string(b)
}

// noteWrite records a write, counting it as a no-op when the server returned
// the resourceVersion of our previous write.
func (e *Engine) noteWrite(c Change, response any, sent string) {
	w := write{rv: resourceVersion(response), at: time.Now(), desired: sent, created: c.Action == Created}
	if prev, ok := e.written.Swap(key(c), w); ok && prev.(write).rv == w.rv {
		e.noops.Add(1)
	}
	if e.applies.Load()%1024 == 0 {
		e.sweep(w.at.Add(-time.Minute))
	}
}

// sweep forgets writes older than before, so memory stays bounded by the
// objects written in the last minute.
func (e *Engine) sweep(before time.Time) {
	e.written.Range(func(k, v any) bool {
		if v.(write).at.Before(before) {
			e.written.Delete(k)
		}
		return true
	})
}

// recentlyCreated reports that we created this object, as desired now,
// within CreateExpectation.
func (e *Engine) recentlyCreated(c Change, desired any) bool {
	v, ok := e.written.Load(key(c))
	if !ok {
		return false
	}
	w := v.(write)
	return w.created && time.Since(w.at) < CreateExpectation && w.desired == Fingerprint(desired)
}

// Forget drops what the engine remembers about an object (it was deleted).
func (e *Engine) Forget(kind, namespace, name string) {
	for _, kind := range []string{kind, kind + "|" + e.AnnotationManager()} {
		k := key(Change{Kind: kind, Namespace: namespace, Name: name})
		e.written.Delete(k)
		e.verified.Delete(k)
	}
}

func key(c Change) string { return c.Kind + "/" + c.Namespace + "/" + c.Name }

// resourceVersion reads the resourceVersion the server returned into an
// apply configuration (only on the write path, after a request).
func resourceVersion(ac any) string {
	b, err := json.Marshal(ac)
	if err != nil {
		return ""
	}
	var meta struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(b, &meta) != nil {
		return ""
	}
	return meta.Metadata.ResourceVersion
}
