package bench

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SDKTimeline is the per-claim timeline (ClaimTimeline) of the claims the
// Go SDK made in one phase, each claim's create sent when its
// sandbox.create_claim span began and its create request lasting until its
// sandbox.wait_bound began (the POST, with the claim's watch opened beside
// it). BoundAfterReady is when the SDK's wait for the binding ended, less
// when the bench's own watch first saw the claim Ready (negative when the
// SDK saw it first): how much of sandbox.wait_bound the controller
// explains, and how much is the delivery of the claim's change to the SDK.
// Unspanned is the part of each sandbox.create_claim that neither its
// create request nor a span of its own (its wait for the binding, its
// Sandbox's read, its wait for Ready, its first request) covers.
type SDKTimeline struct {
	ClaimTimeline
	BoundAfterReady Quantiles `json:"sdk_bound_after_bench_ready_ms"`
	Unspanned       Quantiles `json:"create_claim_unspanned_ms"`
}

// sdkTimeline matches the SDK's claims of one phase (spans, from
// sdkSteps.lastSpans) to the claims the clock watched by their
// trace-context annotation, whose parent is the claim's
// sandbox.create_claim span, and times them.
func (k *claimClock) sdkTimeline(spans []sdktrace.ReadOnlySpan) *SDKTimeline {
	creates := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	waits := map[trace.SpanID]sdktrace.ReadOnlySpan{} // by their parent
	children := map[trace.SpanID]time.Duration{}      // by their parent
	for _, sp := range spans {
		children[sp.Parent().SpanID()] += sp.EndTime().Sub(sp.StartTime())
		switch sp.Name() {
		case "sandbox.create_claim":
			creates[sp.SpanContext().SpanID()] = sp
		case "sandbox.wait_bound":
			waits[sp.Parent().SpanID()] = sp
		}
	}
	var names []string
	var after, unspanned []float64
	k.mu.Lock()
	for name, tc := range k.traceContext {
		id := parentSpanOf(tc)
		create, wait := creates[id], waits[id]
		if create == nil || wait == nil {
			continue
		}
		names = append(names, name)
		k.sent[name], k.created[name] = create.StartTime(), wait.StartTime().Sub(create.StartTime())
		unspanned = append(unspanned, ms(create.EndTime().Sub(create.StartTime())-k.created[name]-children[id]))
		if ready, ok := k.readyAt[name]; ok {
			after = append(after, ms(wait.EndTime().Sub(ready)))
		}
	}
	k.mu.Unlock()
	return &SDKTimeline{ClaimTimeline: k.timelineOf(names), BoundAfterReady: quantilesOf(after), Unspanned: quantilesOf(unspanned)}
}

// parentSpanOf is the span a trace-context annotation (a JSON map of W3C
// trace context headers) names; the zero SpanID if it names none.
func parentSpanOf(annotation string) trace.SpanID {
	carrier := propagation.MapCarrier{}
	if json.Unmarshal([]byte(annotation), &carrier) != nil {
		return trace.SpanID{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), carrier)
	return trace.SpanContextFromContext(ctx).SpanID()
}
