package tracing

import (
	"fmt"
	"os"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsandbox/reconciler/tests/envtest"
	"github.com/agentsandbox/reconciler/tests/manager"
)

var (
	env      *envtest.Env
	recorder = tracetest.NewSpanRecorder()
)

func TestMain(m *testing.M) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	// The SDK traces with the global provider, as a program that set up
	// tracing has it.
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	envtest.Main(m, &env, func(e *envtest.Env) (func(), error) {
		running, err := manager.Start(e.Config, e.Scheme, manager.Options{Extensions: true, Tracer: tp})
		if err != nil {
			return nil, err
		}
		return func() {
			if err := running.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}, nil
	})
}
