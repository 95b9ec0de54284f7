// Package ssa is the one write path of the controller: server-side apply with
// a field manager for objects and another for status, preceded by a diff
// against what our field manager already owns (client-go's managed-fields
// extraction), so an object that is already as desired costs no request.
//
// Every write is an apply but two: Create (create-only, for objects whose
// name is derived, so a stale view never overwrites one; the create's Update
// entry is then moved into our Apply entry with client-go's csaupgrade, so a
// later apply of ours can remove a field) and Delete (guarded by UID, and by
// resourceVersion where asked). Annotations the controller records apart
// from the rest are applied under their own manager (AnnotationManager).
//
// What was written is remembered in one type, Memory: a record per object
// (kind, namespace and name; the object's UID, so that a namesake is never
// taken for it), with the resourceVersion the write produced, a digest of
// the intent written, when, and what the writer keeps with it. The engine
// keeps two: its writes (created moments ago, no-op writes), swept so that
// only the last minute's stay, and the objects whose owned fields
// extraction found equal to the desired ones (forgotten with the object).
// The reconcilers keep theirs in one too. Extractions themselves (Extract)
// are remembered per object, by UID and our managedFields entry, since the
// values of the fields a manager owns cannot change while its entry stays.
//
// It returns what it did as a change set (Kind/namespace/name: created,
// configured, unchanged or deleted). It never forces ownership of fields
// another manager holds unless the caller asks (adoption; the webhook
// certificates' Secret and CA bundle fields), and it has no
// knowledge of any particular kind beyond the extract function it is given.
package ssa
