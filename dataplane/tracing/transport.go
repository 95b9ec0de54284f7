package tracing

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/rest"
)

// WrapConfig makes every API request cfg's clients send under an active,
// recording span a child span of it ("<METHOD> <path>"), with the trace
// context sent along. Requests without one (informers' lists and watches,
// leader election) go out as before, without a span. Call it only when
// tracing is enabled.
func WrapConfig(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return Transport(rt) })
}

// Transport is WrapConfig's round tripper around rt.
func Transport(rt http.RoundTripper) http.RoundTripper {
	traced := otelhttp.NewTransport(rt, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
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
