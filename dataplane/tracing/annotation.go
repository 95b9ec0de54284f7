package tracing

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Annotation is upstream's trace-context annotation key.
const Annotation = sandboxv1beta1.AnnotationTraceContext

// maxAnnotation bounds the annotation values read: a W3C traceparent and
// tracestate fit well within it.
const maxAnnotation = 1024

var w3c = propagation.TraceContext{}

// ContextJSON is the annotation value for ctx's span: {"traceparent": ...}
// (and "tracestate" when there is one), or "" when ctx has no valid span
// context, as when tracing is off.
func ContextJSON(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return ""
	}
	b, err := json.Marshal(map[string]string(carrier))
	if err != nil {
		return ""
	}
	return string(b)
}

// FromAnnotations returns ctx carrying, as its remote parent, the span
// context in annotations' trace-context annotation; ctx unchanged when
// there is none or it does not parse.
func FromAnnotations(ctx context.Context, annotations map[string]string) context.Context {
	v := annotations[Annotation]
	if v == "" || len(v) > maxAnnotation {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	if err := json.Unmarshal([]byte(v), &carrier); err != nil {
		return ctx
	}
	out := w3c.Extract(ctx, carrier)
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx
	}
	return out
}
