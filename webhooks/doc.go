// Package webhooks serves admission for our kinds: it validates objects with
// the policy engine, renders them and validates the Pods they will become
// (failing closed when it cannot), lets only the controller's own identity
// make a Sandbox or claim controlled by a pool or claim, and manages the
// webhook serving certificates. It must never mutate user objects.
package webhooks
