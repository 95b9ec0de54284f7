// Package otlpsink is a minimal OTLP/HTTP trace receiver for tests and for
// looking at traces on a development machine: it accepts POST /v1/traces
// (protobuf ExportTraceServiceRequest, as the OTLP exporters send it),
// keeps the spans in memory and prints a trace as a tree of spans. It is
// not a collector: nothing is stored, forwarded or bounded beyond a test's
// or a session's worth of spans. tests/otlpsink/serve serves it on a port.
package otlpsink
