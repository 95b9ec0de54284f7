package tracing_test

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/dataplane/runtime"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
	"github.com/agentsandbox/reconciler/tests/otlpsink"
)

// receiver is an OTLP/HTTP endpoint in the test: what a collector receives.
func newReceiver(t *testing.T) (*otlpsink.Sink, string) {
	sink := &otlpsink.Sink{}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	return sink, srv.URL
}

// chain runs a runtime behind a router (each tracing with tp, nil for off)
// and returns the router's URL and a stop that closes both once their
// requests are done (so that their spans have ended).
func chain(t *testing.T, tp trace.TracerProvider) (string, func()) {
	t.Helper()
	rt := httptest.NewServer(runtime.New(runtime.Options{BaseDir: t.TempDir(), Tracer: tp}))
	t.Cleanup(rt.Close)
	host, portStr, _ := net.SplitHostPort(strings.TrimPrefix(rt.URL, "http://"))
	port, _ := strconv.Atoi(portStr)
	h := router.NewHandler(router.Options{
		Resolver: router.ResolverFunc(func(_ context.Context, tg router.Target) (router.Endpoint, error) {
			return router.Endpoint{Namespace: tg.Namespace, Sandbox: tg.ID, Pod: tg.ID,
				IP: netip.MustParseAddr(host), Port: port, Source: "test"}, nil
		}),
		Transport: router.NewTransport(nil),
		Limits:    router.Limits{DefaultTimeout: 10 * time.Second, MaxTimeout: 20 * time.Second, AllowLocalAddresses: true},
		Tracer:    tp,
	})
	rs := httptest.NewServer(h)
	t.Cleanup(rs.Close)
	return rs.URL, func() { rs.Close(); rt.Close() }
}

func run(t *testing.T, ctx context.Context, routerURL string) {
	t.Helper()
	sb, err := client.Dial(ctx, "team-a", "sb-1", client.WithRouter(routerURL))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	res, err := sb.Run(ctx, "echo hi")
	if err != nil || res.Stdout != "hi\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
}

// TestOffExportsNothing: with no endpoint Setup changes nothing, and a
// call through the router reaches the runtime with no span made and
// nothing sent to a collector that is listening. (It must run before
// TestTraceSDKRouterRuntime, which installs a global provider.)
func TestOffExportsNothing(t *testing.T) {
	sink, _ := newReceiver(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	shutdown, enabled, err := tracing.Setup(context.Background(), tracing.Options{Service: "test"})
	if err != nil || enabled {
		t.Fatalf("Setup without endpoint: enabled=%v err=%v", enabled, err)
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "test.root")
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Fatalf("the global tracer provider records with tracing off")
	}
	url, _ := chain(t, nil)
	run(t, ctx, url)
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans, posts := sink.Spans(); posts != 0 || len(spans) != 0 {
		t.Fatalf("tracing off exported %d requests, %d spans", posts, len(spans))
	}
}

// TestTraceSDKRouterRuntime: one trace from the SDK's Run through the
// router to the runtime, received by a real OTLP/HTTP endpoint: the same
// trace ID everywhere and each span's parent the span before it.
func TestTraceSDKRouterRuntime(t *testing.T) {
	sink, url := newReceiver(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	shutdown, enabled, err := tracing.Setup(context.Background(), tracing.Options{Endpoint: url, Service: "chain-test"})
	if err != nil || !enabled {
		t.Fatalf("Setup: enabled=%v err=%v", enabled, err)
	}
	ctx, root := otel.Tracer("test").Start(context.Background(), "test.root")
	url, stop := chain(t, otel.GetTracerProvider())
	run(t, ctx, url)
	root.End()
	// A hop's span ends after its answer is sent: the servers are closed
	// (their handlers returned) before the spans are flushed.
	stop()
	if err := shutdown(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	received, _ := sink.Spans()
	t.Logf("received:\n%s", otlpsink.Tree(received))
	// Walk up from the runtime's span: each parent must be the span the
	// hop before made, all in the caller's trace.
	byID := map[string]otlpsink.Span{}
	var s otlpsink.Span
	for _, x := range received {
		byID[x.SpanID()] = x
		if x.GetName() == "runtime.execute" {
			s = x
		}
	}
	if s.Span == nil {
		t.Fatal("no runtime.execute span received")
	}
	traceID := root.SpanContext().TraceID().String()
	up := []string{"runtime.execute", "router.proxy", "router.request", "sandbox.run", "test.root"}
	for i, n := range up {
		if s.GetName() != n || s.TraceID() != traceID {
			t.Fatalf("hop %d: span %q of trace %s, want %q of trace %s", i, s.GetName(), s.TraceID(), n, traceID)
		}
		if i+1 < len(up) {
			parent, ok := byID[s.ParentID()]
			if !ok {
				t.Fatalf("%s: parent %s not received, want %s", n, s.ParentID(), up[i+1])
			}
			s = parent
		}
	}
	if svc := byID[root.SpanContext().SpanID().String()].Service; svc != "chain-test" {
		t.Errorf("service.name %q, want chain-test", svc)
	}
}
