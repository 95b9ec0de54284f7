package controllers

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// tracerName names the controllers' spans' instrumentation scope.
const tracerName = "github.com/agentsandbox/reconciler/apply/controllers"

// maxTraceContext bounds the trace-context annotation values read (they
// are the object's author's input).
const maxTraceContext = 1024

var w3c = propagation.TraceContext{}

// reconcileSpan starts the span of one reconcile of o, continuing the trace
// in o's trace-context annotation when it has a valid one (the SDK writes
// it on the claims it creates). With tp nil (tracing off) it makes no span
// and reads no annotation.
func reconcileSpan(ctx context.Context, tp trace.TracerProvider, name string, o client.Object) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	if v := o.GetAnnotations()[sandboxv1beta1.AnnotationTraceContext]; v != "" && len(v) <= maxTraceContext {
		carrier := propagation.MapCarrier{}
		if json.Unmarshal([]byte(v), &carrier) == nil {
			if pctx := w3c.Extract(ctx, carrier); trace.SpanContextFromContext(pctx).IsValid() {
				ctx = pctx
			}
		}
	}
	return tp.Tracer(tracerName).Start(ctx, name, trace.WithAttributes(
		attribute.String("k8s.namespace.name", o.GetNamespace()), attribute.String("k8s.object.name", o.GetName()),
		attribute.String("k8s.object.uid", string(o.GetUID()))))
}

// endReconcileSpan records err on span and ends it.
func endReconcileSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceContext is the trace-context annotation value of ctx's recording
// span, "" without one (tracing off, or not sampled).
func traceContext(ctx context.Context) string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	b, err := json.Marshal(map[string]string(carrier))
	if err != nil || carrier["traceparent"] == "" {
		return ""
	}
	return string(b)
}
