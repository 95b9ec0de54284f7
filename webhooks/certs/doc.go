// Package certs issues, rotates and serves the admission and conversion
// webhooks' serving certificate when the controller manages it itself: a CA
// and a serving certificate kept in one Secret shared by every replica,
// served from memory, and the CA bundle injected into the webhook
// configuration and the CRDs' conversion webhooks. A rotation never breaks
// a caller (old and new CA trusted across it) and every replica watches the
// Secret. The Secret and the caBundle fields are written with server-side
// apply through apply/ssa under their own field manager (FieldManager). It
// must never write any field of the webhook configuration or the CRDs but
// caBundle.
package certs
