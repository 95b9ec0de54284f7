package client

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// Headers a router reads (upstream's sandbox-router).
const (
	HeaderSandboxID        = "X-Sandbox-ID"
	HeaderSandboxNamespace = "X-Sandbox-Namespace"
	HeaderSandboxPort      = "X-Sandbox-Port"
	HeaderSandboxTimeout   = "X-Sandbox-Timeout"
	// HeaderSandboxUID pins a request to the Sandbox the client resolved:
	// a router refuses it (404) when the name now stands for another one.
	HeaderSandboxUID = "X-Sandbox-UID"
	HeaderRequestID  = "X-Request-ID"
	// HeaderNotForwarded ("true") on a router's answer says the request
	// never reached the sandbox (ours, not upstream's router): any call,
	// Run included, is sent again then.
	HeaderNotForwarded = "X-Sandbox-Not-Forwarded"
)

// conn is how one Sandbox's requests travel.
type conn struct {
	base       string // URL the endpoints are appended to
	http       *http.Client
	router     bool // send the X-Sandbox-* headers
	token      string
	namespace  string
	name       string
	uid        *uidPin   // the Sandbox's, sent to a router when known
	claimUID   types.UID // the claim's, sent to a router that checks it
	port       int
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
	close      func() // releases the port-forward, if any
	// proc is sandboxd's ProcessService (WithSandboxd), nil for the legacy
	// protocol: then files go to /v1/files and health to /v1/health.
	proc processpb.ProcessServiceClient
	// reach connects the sandboxd port-forward (checking that the Pod is
	// still its Sandbox's) before a gRPC call; nil for other transports.
	reach func(context.Context) error
	// starting: the Sandbox is starting (polling), so a Pod not found yet
	// (podGone) is waited for like any other refusal, not final.
	starting bool
}

// healthEndpoint is the runtime's health check: GET / (legacy) or GET
// /v1/health (sandboxd).
func (c *conn) healthEndpoint() string {
	if c.proc != nil {
		return "v1/health"
	}
	return ""
}

// request is one call to the runtime.
type request struct {
	op          string // for errors: run, write, read, ...
	method      string
	endpoint    string // e.g. "execute", "download/a%2Fb"
	body        io.Reader
	length      int64 // of body; -1 unknown
	contentType string
	idempotent  bool // retried on connection errors and 500/502/503/504
	// resolveOnly asks a router of ours to answer itself once the request
	// is routed (HeaderResolveOnly), not to send it on.
	resolveOnly bool
	// replay makes the body again for a call that is not idempotent, sent
	// again only when a router answered HeaderNotForwarded (nil: a body
	// that cannot be made again is sent once).
	replay func() io.Reader
}

func retryable(status int) bool {
	switch status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends r (more than once only if it is idempotent) and returns a 2xx
// response, whose body the caller closes; any other status is an
// *HTTPError.
func (c *conn) do(ctx context.Context, r request) (resp *http.Response, err error) {
	id := requestID()
	ctx, span := tracer().Start(ctx, "sandbox."+r.op, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("sandbox.namespace", c.namespace), attribute.String("sandbox.name", c.name),
			attribute.String("http.request.method", r.method), attribute.String("sandbox.request_id", id))
	}
	defer func() { endSpan(span, resp, err) }()
	attempts := 1
	if r.idempotent || c.router && (r.body == nil || r.replay != nil) {
		attempts = c.attempts
	}
	var last error
	for i := range attempts {
		if i > 0 {
			if err := sleep(ctx, c.wait(i)); err != nil {
				return nil, ctxError(ctx, last)
			}
			if r.replay != nil {
				r.body = r.replay()
			}
		}
		resp, err := c.send(ctx, r, id)
		if err == nil && c.claimUID != "" {
			// Opened by claim: the router names the Sandbox it checked.
			c.uid.learn(resp.Header.Get(HeaderSandboxUID))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxError(ctx, err)
			}
			last = fmt.Errorf("%s: %w", r.op, err)
			var p permanent
			gone := podGone{}
			if !r.idempotent || errors.As(err, &p) && (!c.starting || !errors.As(err, &gone)) {
				// Final, but for a Pod not found yet while starting; a call
				// that is not idempotent may have reached the sandbox.
				return nil, last
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		unsent := c.router && resp.Header.Get(HeaderNotForwarded) == "true"
		herr := httpError(r.op, id, resp)
		if !retryable(resp.StatusCode) || !r.idempotent && !unsent {
			return nil, herr
		}
		last = herr
	}
	if attempts == 1 {
		return nil, last
	}
	return nil, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempts, last)
}

func (c *conn) send(ctx context.Context, r request, id string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.endpoint, r.body)
	if err != nil {
		return nil, permanent{err}
	}
	if r.body != nil {
		req.ContentLength = r.length
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set(HeaderRequestID, id)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // traceparent, when tracing
	if c.router {
		if c.name != "" { // else the claim names it (openRouted)
			req.Header.Set(HeaderSandboxID, c.name)
		}
		req.Header.Set(HeaderSandboxNamespace, c.namespace)
		req.Header.Set(HeaderSandboxPort, strconv.Itoa(c.port))
		if uid := c.uid.get(); uid != "" {
			req.Header.Set(HeaderSandboxUID, string(uid))
		}
		if c.claimUID != "" {
			req.Header.Set(HeaderSandboxClaimUID, string(c.claimUID))
		}
		if r.resolveOnly {
			req.Header.Set(HeaderResolveOnly, "true")
		}
		if d, ok := ctx.Deadline(); ok {
			req.Header.Set(HeaderSandboxTimeout, strconv.FormatFloat(max(time.Until(d).Seconds(), 0.001), 'f', 3, 64))
		}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.http.Do(req)
}

func httpError(op, id string, resp *http.Response) *HTTPError {
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &HTTPError{Op: op, StatusCode: resp.StatusCode, Detail: errorDetail(body), RequestID: id}
}

// wait is the pause before attempt i (1, 2, ...): backoff doubling up to
// maxBackoff, +-25% jitter.
func (c *conn) wait(i int) time.Duration {
	d := c.backoff
	for ; i > 1 && d < c.maxBackoff; i-- {
		d *= 2
	}
	d = min(d, c.maxBackoff)
	if q := int64(d / 2); q > 0 {
		d += time.Duration(rand.Int64N(q)) - d/4
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ctxError reports a context's end as ErrTimeout (deadline) or its cause.
func ctxError(ctx context.Context, last error) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		if last != nil {
			return fmt.Errorf("%w: %w (last error: %w)", ErrTimeout, cause, last)
		}
		return fmt.Errorf("%w: %w", ErrTimeout, cause)
	}
	return cause
}

// requestID is a random X-Request-ID, the same for every attempt of a call.
func requestID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// encodePath percent-encodes every byte outside RFC 3986's unreserved set,
// "/" included, as upstream's SDK does ("." and ".." too, so no proxy
// collapses them).
func encodePath(p string) string {
	switch p {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(p) {
		ch := p[i]
		if 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' ||
			ch == '-' || ch == '_' || ch == '.' || ch == '~' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[ch>>4])
		b.WriteByte(hexdigits[ch&15])
	}
	return b.String()
}

// tracer is the SDK's tracer from the global provider: a no-op unless the
// program set one up (tracing.Setup, or its own).
func tracer() trace.Tracer {
	return otel.Tracer("github.com/agentsandbox/reconciler/dataplane/client")
}

func endSpan(span trace.Span, resp *http.Response, err error) {
	if span.IsRecording() {
		if resp != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// traceContextJSON is upstream's trace-context annotation value for ctx's
// span ({"traceparent": ...}), or "" without a valid span context. (The
// SDK does not import dataplane/tracing, which brings the OTLP exporter.)
func traceContextJSON(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	b, err := json.Marshal(map[string]string(carrier))
	if err != nil || carrier["traceparent"] == "" {
		return ""
	}
	return string(b)
}
