package bench

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Step is one step of claim -> first command, from the Go SDK's spans:
// how long it took (p50 and p99 over the phase's claims).
type Step struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// sdkSteps records the SDK's spans (sandbox.create_claim, its
// sandbox.wait_bound, sandbox.get_sandbox, sandbox.wait_ready and
// sandbox.health, then sandbox.run), so that each phase can say where the
// time between a claim's create and its first command's output went.
type sdkSteps struct {
	rec  *tracetest.SpanRecorder
	mu   sync.Mutex
	seen int
	// last is the spans the last call to since summarised.
	last []sdktrace.ReadOnlySpan
}

// recordSDKSteps installs a tracer provider that records every span the
// SDK makes in this process, until the test ends.
func recordSDKSteps(t *testing.T) *sdkSteps {
	s := &sdkSteps{rec: tracetest.NewSpanRecorder()}
	prev := otel.GetTracerProvider()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.rec))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return s
}

// since summarises, by span name, the spans ended since the last call.
func (s *sdkSteps) since() map[string]Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	ended := s.rec.Ended()
	byName := map[string][]float64{}
	s.last = ended[s.seen:]
	for _, sp := range s.last {
		if !strings.HasPrefix(sp.Name(), "sandbox.") {
			continue
		}
		byName[sp.Name()] = append(byName[sp.Name()], ms(sp.EndTime().Sub(sp.StartTime())))
	}
	s.seen = len(ended)
	out := map[string]Step{}
	for name, d := range byName {
		sort.Float64s(d)
		out[name] = Step{Count: len(d), P50Ms: round2(quantile(d, 0.5)), P99Ms: round2(quantile(d, 0.99))}
	}
	return out
}

// lastSpans returns the spans the last call to since summarised.
func (s *sdkSteps) lastSpans() []sdktrace.ReadOnlySpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
