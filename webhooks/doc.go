// Package webhooks serves admission for our kinds: it validates objects with
// the policy engine, renders them and validates the Pods they will become
// (failing closed when it cannot), refuses resume annotations that do not
// parse, lets only the controller's own identity make a Sandbox or claim
// controlled by a pool or claim (a reference of those kinds under any API
// group), and manages the webhook serving
// certificates (rotated with old and new CA trusted, watched by every
// replica; the Secret and the CA bundle fields are written with server-side
// apply through apply/ssa under their own field manager). Admission and
// conversion request bodies are capped. It must never mutate user objects,
// nor write any field of the webhook configuration or the CRDs but caBundle.
package webhooks
