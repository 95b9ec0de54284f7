// Package tracing is the OpenTelemetry wiring every binary and the Go SDK
// share: Setup installs an OTLP/HTTP exporter as the global tracer provider
// when an endpoint is configured (the --otlp-endpoint flag, or the standard
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT
// variables) and leaves OpenTelemetry's no-op globals in place otherwise, so
// with no endpoint nothing is recorded, buffered or sent.
//
// It also reads and writes upstream's trace-context annotation
// (opentelemetry.io/trace-context: a JSON object of W3C Trace Context
// headers) on SandboxClaims and Sandboxes, and wraps a Kubernetes client's
// transport so that API requests made under an active span become its
// child spans (requests with no span, such as watches and lease renewals,
// pass untouched).
//
// It never exports anything unless an endpoint was configured, never reads
// credentials, and treats an annotation's value as untrusted input: an
// oversized or malformed value is ignored, never an error.
package tracing
