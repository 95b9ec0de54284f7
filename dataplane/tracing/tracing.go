package tracing

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Environment variables naming the OTLP endpoint (OpenTelemetry's own).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Options configure Setup.
type Options struct {
	// Endpoint is the OTLP/HTTP URL spans go to (the --otlp-endpoint flag),
	// e.g. http://localhost:4318; a URL without a path gets /v1/traces.
	// Empty: the environment's endpoint, if any.
	Endpoint string
	// Service is the service.name resource attribute unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES name one.
	Service string
}

// Configured reports whether tracing is asked for: an endpoint in o or in
// the environment.
func (o Options) Configured() bool {
	return o.Endpoint != "" || os.Getenv(EnvTracesEndpoint) != "" || os.Getenv(EnvEndpoint) != ""
}

// Setup installs an OTLP/HTTP exporting tracer provider and the W3C trace
// context propagator as OpenTelemetry's globals when o.Configured, and
// returns a function that flushes and stops it. Without an endpoint it
// changes nothing (the globals stay no-ops), returns enabled false and a
// shutdown that does nothing.
func Setup(ctx context.Context, o Options) (shutdown func(context.Context) error, enabled bool, err error) {
	noop := func(context.Context) error { return nil }
	if !o.Configured() {
		return noop, false, nil
	}
	var opts []otlptracehttp.Option
	if o.Endpoint != "" {
		u, err := endpointURL(o.Endpoint)
		if err != nil {
			return noop, false, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return noop, false, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", o.Service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return noop, false, fmt.Errorf("describing the trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	return tp.Shutdown, true, nil
}

// endpointURL checks a --otlp-endpoint value and gives it the OTLP/HTTP
// traces path when it has none.
func endpointURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL such as http://localhost:4318", s)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// FlagUsage is the --otlp-endpoint flag's help, the same in every binary.
const FlagUsage = "OTLP/HTTP endpoint traces are sent to, e.g. http://localhost:4318 (path /v1/traces added when none); empty: " +
	EnvTracesEndpoint + " or " + EnvEndpoint + " if set, else tracing is off (no spans are made or sent)."

// Provider is the tracer provider to give the router and the runtime: the
// global one when Setup enabled tracing, else nil (off).
func Provider(enabled bool) trace.TracerProvider {
	if !enabled {
		return nil
	}
	return otel.GetTracerProvider()
}

// Shutdown flushes and stops tracing within 5 seconds, reporting a
// failure to log.
func Shutdown(shutdown func(context.Context) error, log func(error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log(fmt.Errorf("flushing traces: %w", err))
	}
}

// CheckEndpoint reports a --otlp-endpoint value Setup would refuse; empty
// is fine (tracing off, or the environment's endpoint).
func CheckEndpoint(s string) error {
	if s == "" {
		return nil
	}
	_, err := endpointURL(s)
	return err
}
