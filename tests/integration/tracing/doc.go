// Package tracing tests tracing of claims against a real API server
// (envtest) with the controller's reconcilers running traced, as the
// controller runs with --otlp-endpoint: the Go SDK creates a claim under a
// span and writes upstream's trace-context annotation, the claim's
// reconciles continue that trace with the API calls they make as child
// spans, and the Sandbox the claim cold-starts carries the reconcile's
// context. Spans are kept in memory (the SDK's span recorder); the
// OTLP/HTTP export itself is tested in dataplane/tracing.
package tracing
