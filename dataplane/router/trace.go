package router

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsandbox/reconciler/dataplane/tracing"
)

// tracerName names the router's spans' instrumentation scope.
const tracerName = "github.com/agentsandbox/reconciler/dataplane/router"

var propagator = tracing.Propagator

// noSpan is what the span helpers return with tracing off.
var noSpan = trace.SpanFromContext(context.Background())

// serverSpan continues the trace of r's traceparent (or starts one) with a
// server span for the request. With Options.Tracer nil it does nothing: r
// is returned as is and its traceparent reaches the sandbox unchanged.
func (h *Handler) serverSpan(r *http.Request, name string) (*http.Request, trace.Span) {
	if h.o.Tracer == nil {
		return r, noSpan
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.o.Tracer.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return r.WithContext(ctx), span
}

// clientSpan is the span of the request proxied to the sandbox, a child of
// the server span in ctx.
func (h *Handler) clientSpan(ctx context.Context, t Target, ep Endpoint, reqID string) (context.Context, trace.Span) {
	if h.o.Tracer == nil {
		return ctx, noSpan
	}
	return h.o.Tracer.Tracer(tracerName).Start(ctx, "router.proxy", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sandbox.namespace", t.Namespace), attribute.String("sandbox.name", t.ID),
			attribute.Int("sandbox.port", t.Port), attribute.String("k8s.pod.name", ep.Pod),
			attribute.String("sandbox.request_id", reqID)))
}

// inject writes ctx's trace context into the proxied request's headers
// (replacing the client's traceparent with the router's client span).
func (h *Handler) inject(ctx context.Context, out http.Header) {
	if h.o.Tracer != nil {
		propagator.Inject(ctx, propagation.HeaderCarrier(out))
	}
}

// endSpan records the answer's status on span and ends it.
func endSpan(span trace.Span, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
