// Package webhooks serves admission for our kinds: it validates objects with
// the policy engine, renders them and validates the Pods they will become, and
// manages the webhook serving certificates. It must never mutate user objects.
package webhooks
