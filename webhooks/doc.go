// Package webhooks serves admission for our kinds: it validates objects with
// the policy engine, renders them and validates the Pods they will become
// (failing closed when it cannot), refuses resume annotations that do not
// parse, lets only the controller's own identity make a Sandbox or claim
// controlled by a pool or claim (a reference of those kinds under any API
// group) or change an unclaimed warm member's spec and reserved metadata,
// and converts between API versions (CRD conversion). Admission and
// conversion request bodies are capped. Its serving certificates are the
// business of webhooks/certs. It must never mutate user objects.
package webhooks
