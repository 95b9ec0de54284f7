package tracing

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator sends the span's context to the API server (traceparent),
// whatever the global propagator is.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Transport wraps a Kubernetes client's transport (rest.Config.Wrap) so
// that every API request sent under an active, recording span becomes a
// child span of it ("<METHOD> <path>"), with the trace context sent along.
// Requests without one (informers' lists and watches, leader election) go
// out as before, without a span. Wrap with it only when tracing is enabled.
func Transport(rt http.RoundTripper) http.RoundTripper {
	traced := otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagator), otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
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
