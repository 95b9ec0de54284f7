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
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/dataplane/runtime"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
)

// chain runs a runtime behind a router (each tracing with tp, nil for off)
// and returns the router's URL.
func chain(t *testing.T, tp trace.TracerProvider) string {
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
	return rs.URL
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
	rc := newReceiver(t)
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
	run(t, ctx, chain(t, nil))
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if posts, spans := rc.count(); posts != 0 || spans != 0 {
		t.Fatalf("tracing off exported %d requests, %d spans", posts, spans)
	}
}

// TestTraceSDKRouterRuntime: one trace from the SDK's Run through the
// router to the runtime, received by a real OTLP/HTTP endpoint: the same
// trace ID everywhere and each span's parent the span before it.
func TestTraceSDKRouterRuntime(t *testing.T) {
	rc := newReceiver(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	shutdown, enabled, err := tracing.Setup(context.Background(), tracing.Options{Endpoint: rc.srv.URL, Service: "chain-test"})
	if err != nil || !enabled {
		t.Fatalf("Setup: enabled=%v err=%v", enabled, err)
	}
	ctx, root := otel.Tracer("test").Start(context.Background(), "test.root")
	run(t, ctx, chain(t, otel.GetTracerProvider()))
	root.End()
	if err := shutdown(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	spans := rc.byName()
	want := []string{"test.root", "sandbox.run", "router.request", "router.proxy", "runtime.execute"}
	for _, n := range want {
		if spans[n] == nil {
			t.Fatalf("no %q span received; got %v", n, names(spans))
		}
	}
	traceID := id(spans["test.root"].GetTraceId())
	for i, n := range want {
		s := spans[n]
		if got := id(s.GetTraceId()); got != traceID {
			t.Errorf("%s: trace %s, want %s", n, got, traceID)
		}
		if i == 0 {
			continue
		}
		if got, parent := id(s.GetParentSpanId()), id(spans[want[i-1]].GetSpanId()); got != parent {
			t.Errorf("%s: parent %s, want %s (%s)", n, got, parent, want[i-1])
		}
	}
	if rc.services[0] != "chain-test" {
		t.Errorf("service.name %q, want chain-test", rc.services[0])
	}
}

func names(m map[string]*tracepb.Span) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}
