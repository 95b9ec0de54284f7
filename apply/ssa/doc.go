// Package ssa is the one write path of the controller: server-side apply with
// a field manager for objects and another for status, preceded by a diff
// against what our field manager already owns (client-go's managed-fields
// extraction), so an object that is already as desired costs no request.
//
// Every write is an apply but two: Delete (guarded by UID, and by
// resourceVersion where asked) and UpgradeOwnership (a JSON patch of
// managedFields alone, for an object whose fields our manager or others
// hold through Update entries: an older controller's, a fallback create's,
// someone's edit). Create is an apply too, for objects whose
// name is derived, so a stale view never overwrites one: it carries a
// resourceVersion no stored object has, so it creates a missing object and
// fails, writing nothing, on one that exists (create.go). The object is
// then ours through an Apply entry, as any applied object, so a later apply
// of ours can remove a field. On an API server that refuses that, Create
// falls back to a create request whose Update entry is then moved into our
// Apply entry with client-go's csaupgrade. An Apply of an object the
// caller sees none of can be made create-only the same way
// (Options.CreateOnly): a namesake the cache has not shown yet is left
// alone and the change is Pending. Annotations the controller
// records apart from the rest are applied under their own manager
// (AnnotationManager).
//
// What was written is remembered in Memo, a typed memory: one value per
// key, each for one object (its UID), so that a namesake is never taken for
// it; each use keeps its own, with its own key and value types. The engine
// keeps three, keyed by kind, field manager, subresource, namespace and
// name: its writes (the resourceVersion produced, a digest of what was
// sent, when; each forgotten once the cache shows it, as Apply and a
// reconciler's look (Seen) find, and those over a minute old swept every
// 1024 applies: the writes in flight, not every object written), the objects
// whose owned fields extraction found equal to the desired ones, and the
// extractions callers ask for (Extract: the values of the fields a manager
// owns cannot change while its managedFields entry stays; the engine's own
// comparisons read them but remember none; each works on a copy of the
// object without the top-level fields the manager's entry does not reach,
// trim.go: the same result for a fraction of the work). A recent
// managedFields entry (its time is to the second) is ambiguous only while a
// write of ours under its manager may not show in the cached object: on
// its way, past the object's resourceVersion, failed in the last ten
// seconds, or before the engine could know (its first ten seconds); only
// then are those memories keyed by the object's resourceVersion too, and
// every write forgets what they held of the object (settled.go). An
// object at the resourceVersion our last apply of it gave it, that apply
// having sent what is desired now, is compared without extraction
// (asSent); nor is one whose metadata lacks a label, annotation, owner
// reference or finalizer desired sets (metadataDiffers: what a manager owns
// holds the object's values, so it cannot be desired); an extraction for a
// manager with no entry on the object works on a copy without its fields,
// as it finds nothing. All three, and the
// writes sent, are forgotten with the object, its status with it
// (Forget). A fourth holds
// the deletes it made (when, by object UID; swept after a minute): a
// delete of an object it deleted moments ago, read from a cache that has
// not shown the deletion yet, is not sent again. Likewise an unguarded
// apply of what our last write of the object sent, judged against an
// object whose resourceVersion is older than that write's (the cache is
// behind it), is not sent again (aheadOfCache). The reconcilers keep
// theirs in Memos too. A Go map keeps the room it grew to, so a Memo that
// has lost most of what it held is remade at its size.
//
// Creates of one object planned by many workers at once, before the cache
// shows it, are written once: the first is sent, the others wait for it and
// then find it recently created (inflight.go).
//
// It returns what it did as a change set (Kind/namespace/name: created,
// configured, unchanged or deleted). It never forces ownership of fields
// another manager holds unless the caller asks (adoption; the webhook
// certificates' Secret and CA bundle fields), and it has no
// knowledge of any particular kind beyond the extract function it is given.
//
// DryRunApply and DiffObjects preview a write without making it (kubectl
// sandbox diff): a server-side dry-run apply and the diff it would make.
package ssa
