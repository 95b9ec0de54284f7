// Package ssa is the one write path of the controller: server-side apply with
// a field manager for objects and another for status, preceded by a diff
// against what our field manager already owns (client-go's managed-fields
// extraction), so an object that is already as desired costs no request.
//
// An object that must be created only if it does not exist yet is created
// (Create: an object that exists is reported, never overwritten); before it
// is applied, the fields the Create recorded move into our apply entry
// (OwnUpdates, client-go's csaupgrade), so later applies own them.
//
// It returns what it did as a change set (Kind/namespace/name: created,
// configured, unchanged or deleted). It never forces ownership of fields
// another manager holds unless the caller asks (adoption; the webhook
// certificates' Secret and CA bundle fields), and it has no
// knowledge of any particular kind beyond the extract function it is given.
package ssa
