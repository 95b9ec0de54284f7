// Package tracing is the OpenTelemetry wiring every binary and the Go SDK
// share: Setup installs an OTLP/HTTP exporter as the global tracer provider
// when an endpoint is configured (the --otlp-endpoint flag, or the standard
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT
// variables) and leaves OpenTelemetry's no-op globals in place otherwise, so
// with no endpoint nothing is recorded, buffered or sent.
//
// Transport wraps a Kubernetes client's transport so that API requests
// made under an active span become its child spans (requests with no span,
// such as watches and lease renewals, pass untouched).
//
// Upstream's trace-context annotation (opentelemetry.io/trace-context) is
// written by the Go SDK (dataplane/client) and read by the claim
// reconciler (apply/controllers), each with its own few lines: the SDK
// must not link the exporter this package brings, and the controllers do
// not import dataplane/.
//
// It never exports anything unless an endpoint was configured and never
// reads credentials.
package tracing
