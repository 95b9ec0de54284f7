// Package policy tests policy enforcement by the controllers against a real
// API server (envtest): denials reported as PolicyDenied with nothing
// applied, and the way out once the object or the policy is fixed.
package policy
