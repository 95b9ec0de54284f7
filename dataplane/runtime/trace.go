package runtime

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsandbox/reconciler/dataplane/tracing"
)

// tracerName names the runtime's spans' instrumentation scope.
const tracerName = "github.com/agentsandbox/reconciler/dataplane/runtime"

var propagator = tracing.Propagator

// traced wraps the runtime's handler with a server span per request,
// continuing the caller's traceparent (the router's proxy span, or the
// SDK's call when it comes straight through a port-forward). Only built
// when Options.Tracer is set: with tracing off the handler is unwrapped.
type traced struct {
	next   http.Handler
	tracer trace.Tracer
}

func (t *traced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if route == "" {
		route = "health"
	}
	ctx, span := t.tracer.Start(ctx, "runtime."+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", "/"+route)))
	defer span.End()
	sw := &statusWriter{ResponseWriter: w}
	t.next.ServeHTTP(sw, r.WithContext(ctx))
	if sw.code == 0 {
		sw.code = http.StatusOK
	}
	span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
	if sw.code >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(sw.code))
	}
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
