package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// traceparent parses a trace-context annotation value.
func traceparent(t *testing.T, v string) (traceID, spanID string) {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		t.Fatalf("trace-context %q: %v", v, err)
	}
	parts := strings.Split(m["traceparent"], "-")
	if len(parts) != 4 {
		t.Fatalf("trace-context %q: no traceparent", v)
	}
	return parts[1], parts[2]
}

// spansOf returns the ended spans of a trace.
func spansOf(traceID string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			out = append(out, s)
		}
	}
	return out
}

func TestClaimTraceFromSDKToSandbox(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	env.CreatePool(t, ns, "cold", 0)
	rt := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(rt.Close)
	c, err := sdk.New(env.Config, sdk.WithBaseURL(rt.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := otel.Tracer("test").Start(ctxFor(t), "test.root")
	sb, err := c.Create(ctx, ns, "cold")
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	traceID := root.SpanContext().TraceID().String()

	claim := &extv1beta1.SandboxClaim{}
	if err := env.Client.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: sb.ClaimName()}, claim); err != nil {
		t.Fatal(err)
	}
	claimTrace, claimParent := traceparent(t, claim.Annotations[sandboxv1beta1.AnnotationTraceContext])
	if claimTrace != traceID {
		t.Fatalf("claim's trace %s, want the SDK caller's %s", claimTrace, traceID)
	}

	t.Logf("trace %s:\n%s", traceID, tree(spansOf(traceID)))
	var reconciles []sdktrace.ReadOnlySpan
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spansOf(traceID) {
		byID[s.SpanContext().SpanID().String()] = s
		if s.Name() == "SandboxClaim.reconcile" {
			reconciles = append(reconciles, s)
		}
	}
	if len(reconciles) == 0 {
		t.Fatalf("no SandboxClaim.reconcile span in the SDK's trace %s", traceID)
	}
	create := byID[claimParent]
	if create == nil || create.Name() != "sandbox.create_claim" {
		t.Fatalf("the claim's annotation names span %s, want the SDK's sandbox.create_claim", claimParent)
	}
	for _, r := range reconciles {
		if got := r.Parent().SpanID().String(); got != claimParent || !r.Parent().IsRemote() {
			t.Errorf("reconcile span's parent %s (remote %v), want the claim annotation's %s", got, r.Parent().IsRemote(), claimParent)
		}
	}

	// The Sandbox the claim cold-started carries the reconcile's context,
	// and that reconcile's API calls (the Sandbox's creation among them)
	// are its child spans.
	sandbox := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: sb.Name()}, sandbox); err != nil {
		t.Fatal(err)
	}
	sbTrace, sbParent := traceparent(t, sandbox.Annotations[sandboxv1beta1.AnnotationTraceContext])
	if sbTrace != traceID || byID[sbParent] == nil || byID[sbParent].Name() != "SandboxClaim.reconcile" {
		t.Fatalf("Sandbox's trace-context %s/%s: want a SandboxClaim.reconcile span of trace %s", sbTrace, sbParent, traceID)
	}
	var calls []string
	for _, s := range byID {
		if s.Parent().SpanID().String() == sbParent && s.Parent().TraceID().String() == traceID {
			calls = append(calls, s.Name())
		}
	}
	// The create is an apply that only a missing Sandbox lets through.
	want := fmt.Sprintf("PATCH /apis/%s/namespaces/%s/sandboxes/%s", sandboxv1beta1.GroupVersion, ns, sb.Name())
	found := false
	for _, n := range calls {
		found = found || n == want
	}
	if !found {
		t.Fatalf("the reconcile that made the Sandbox has child spans %v, want %q among them", calls, want)
	}
}

// tree renders a trace's spans, children under their parent in start order.
func tree(spans []sdktrace.ReadOnlySpan) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
	known := map[trace.SpanID]bool{}
	for _, s := range spans {
		known[s.SpanContext().SpanID()] = true
	}
	var b strings.Builder
	var walk func(parent trace.SpanID, root bool, depth int)
	walk = func(parent trace.SpanID, root bool, depth int) {
		for _, s := range spans {
			if p := s.Parent().SpanID(); (root && !known[p]) || (!root && p == parent) {
				fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", depth), s.Name(), s.EndTime().Sub(s.StartTime()).Round(10*time.Microsecond))
				walk(s.SpanContext().SpanID(), false, depth+1)
			}
		}
	}
	walk(trace.SpanID{}, true, 0)
	return b.String()
}
