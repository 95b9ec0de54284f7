package tracing

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator reads and writes the W3C trace context (traceparent,
// tracestate) and baggage: what the router, the runtime and API spans use,
// whatever the global propagator is.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Transport wraps a Kubernetes client's transport (rest.Config.Wrap) so
// that every API request sent under an active, recording span becomes a
// child span of it ("<METHOD> <path>"), with the trace context sent along.
// Requests without one (informers' lists and watches, leader election) go
// out as before, without a span. Wrap with it only when tracing is enabled.
func Transport(rt http.RoundTripper) http.RoundTripper {
	traced := otelhttp.NewTransport(rt, otelhttp.WithPropagators(Propagator), otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return r.Method + " " + r.URL.Path
	}))
	return &spanOnly{plain: rt, traced: traced}
}

type spanOnly struct{ plain, traced http.RoundTripper }

func (s *spanOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanFromContext(r.Context()).IsRecording() {
		return s.traced.RoundTrip(r)
	}
	return s.plain.RoundTrip(r)
}
