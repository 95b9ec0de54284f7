package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsandbox/reconciler/dataplane/tracing"
)

// TestTransportSpansOnlyUnderASpan: API requests made under a recording
// span are its children, with traceparent sent; others pass untouched.
func TestTransportSpansOnlyUnderASpan(t *testing.T) {
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("traceparent"))
	}))
	defer api.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := &http.Client{Transport: tracing.Transport(http.DefaultTransport)}
	get := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+"/api/v1/namespaces/a/pods", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	get(context.Background())
	ctx, parent := tp.Tracer("test").Start(context.Background(), "reconcile")
	get(ctx)
	parent.End()
	spans := rec.Ended()
	if len(spans) != 2 || got[0] != "" || got[1] == "" {
		t.Fatalf("spans %d, traceparents %q: want one API span under the reconcile and none without", len(spans), got)
	}
	api0 := spans[0]
	if api0.Name() != "GET /api/v1/namespaces/a/pods" || api0.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("API span %q parent %v, want GET /api/v1/namespaces/a/pods under %v", api0.Name(), api0.Parent().SpanID(), parent.SpanContext().SpanID())
	}
}

func TestCheckEndpoint(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "http://localhost:4318": true, "https://c.example:4318/v1/traces": true,
		"localhost:4318": false, "ftp://x": false, "http://": false} {
		if err := tracing.CheckEndpoint(v); (err == nil) != ok {
			t.Errorf("%q: %v", v, err)
		}
	}
}
