package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/tools/events"

	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// Options configure a Handler.
type Options struct {
	// Resolver finds where a request goes. Required.
	Resolver Resolver
	// Transport carries requests to sandboxes. Required.
	Transport *Transport
	// Authorizer, if set, must let a request through before it is resolved
	// (--auth=tokenreview); nil lets every request through (--auth=none).
	Authorizer Authorizer
	// Limits bound what headers may ask for.
	Limits Limits
	// ResolveWait is how long a request for a Sandbox the cache shows not
	// (yet) routable waits for the cache to catch up: a client that just saw
	// its claim Ready may be a moment ahead of the router's watch.
	ResolveWait time.Duration
	// RouteByClaim routes a request that names only its claim
	// (CheckClaimRoute; off, it gets upstream's 400 for a missing
	// X-Sandbox-ID). It trusts a Sandbox's controller reference to a
	// SandboxClaim, which only the controller may set where the ownership
	// webhook runs: turn it on only there (the deploy bundle, the chart and
	// the local cluster do).
	RouteByClaim bool
	// ClaimWait is how long a request that names only its claim
	// (CheckClaimRoute) waits for the claim to control a routable Sandbox:
	// a client sends it as soon as it made the claim, and a burst of
	// claims takes the controller a while. Zero means ResolveWait.
	ClaimWait time.Duration
	// Changes, if set, is told of every change the resolver's cache takes
	// in (CacheOptions.Changes): a waiting request looks again at once
	// rather than at the next poll (resolvePoll).
	Changes *Changes
	// WebSocketMaxLifetime ends upgraded connections (WebSockets) after
	// this long; zero means no limit. X-Sandbox-Timeout bounds only their
	// handshake.
	WebSocketMaxLifetime time.Duration
	// MaxRequestBodyBytes caps request bodies (413 beyond); zero: no cap.
	MaxRequestBodyBytes int64
	// RuntimeToken, if set, is sent to the sandbox in X-Sandbox-Runtime-Token
	// on every proxied request (WebSockets included), so a runtime that
	// requires it answers only requests that came through the router. A
	// client's own X-Sandbox-Runtime-Token never reaches the sandbox.
	RuntimeToken string
	// Resume, if set, makes resume on connect's write (resume.Writer): a
	// request for a Suspended Sandbox that opted in sets it Running, and
	// waits for it; nil, such requests are refused 409.
	Resume SandboxWriter
	// ResumeTimeout bounds a resume (the write and the wait for the
	// Sandbox to be routable), and how long a request for an opted-in
	// Sandbox that is starting waits for it; zero means
	// resume.DefaultTimeout.
	ResumeTimeout time.Duration
	// UpstreamRetries sends a request again when its connection to the
	// sandbox fails before the sandbox got it (--upstream-max-retries).
	UpstreamRetries UpstreamRetries
	// Events, if set, records a ResumedOnConnect event on each Sandbox the
	// router resumed.
	Events events.EventRecorder
	// Activity, if set, hears of every request proxied to a Sandbox with
	// idle suspend, from its start to the end of its response (of its
	// session for a WebSocket); it reports them off the request path.
	Activity *resume.Reporter
	// ActivityInterval bounds the interval of activity reports of a
	// Sandbox (resume.Interval's max).
	ActivityInterval time.Duration
	// Metrics, if set, records requests.
	Metrics *Metrics
	// Log receives refusals (V(1)) and upstream failures.
	Log logr.Logger
	// Tracer, if set, traces requests: a server span continuing the
	// client's traceparent and a client span for the proxied request, whose
	// context the sandbox receives. Nil (tracing off): no spans, and the
	// client's traceparent passes through unchanged.
	Tracer trace.TracerProvider
}

// Handler is the router's proxy port: /healthz, and every other request
// proxied to the sandbox its headers name.
type Handler struct {
	o       Options
	active  atomic.Int64
	errLog  *log.Logger
	resumes resume.Group
}

// NewHandler returns the proxy handler.
func NewHandler(o Options) *Handler {
	if o.ResumeTimeout <= 0 {
		o.ResumeTimeout = resume.DefaultTimeout
	}
	h := &Handler{o: o}
	h.resumes.Timeout = o.ResumeTimeout
	h.errLog = log.New(logWriter{o.Log.WithName("proxy")}, "", 0)
	return h
}

var (
	errTimeout  = errors.New("the request's timeout passed")
	errLifetime = errors.New("the WebSocket's maximum lifetime passed")
)

// deadlineGrace is added to a request's timeout for the deadlines of the
// client connection, so that a timed-out request can still be answered 504.
const deadlineGrace = 5 * time.Second

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.Header().Set(HeaderChecks, h.checks())
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	rec, r, reqID, start, end := h.begin(w, r)
	defer end()
	t, e := ParseTarget(r.Header, h.o.Limits)
	var waitUntil time.Time
	switch {
	case e == nil && t.ID == "" && !h.o.RouteByClaim:
		e = badRequest("X-Sandbox-ID header is required.")
	case e == nil && t.ID == "":
		t, waitUntil, e = h.claimTarget(r, t, start)
	}
	if e == nil && h.o.Authorizer != nil {
		e = h.o.Authorizer.Authorize(r.Context(), r, t.Namespace, t.ID)
	}
	h.serveTarget(rec, r, start, reqID, t, waitUntil, e)
}

// ServeTarget proxies r to the Sandbox t names, as ServeHTTP does once
// the routing headers are read and the caller authorized: for a front door
// (the E2B API) that names the Sandbox and authorizes callers its own way.
// t.Timeout zero means Limits.DefaultTimeout.
func (h *Handler) ServeTarget(w http.ResponseWriter, r *http.Request, t Target) {
	rec, r, reqID, start, end := h.begin(w, r)
	defer end()
	if t.Timeout <= 0 {
		t.Timeout = h.o.Limits.DefaultTimeout
	}
	h.serveTarget(rec, r, start, reqID, t, time.Time{}, nil)
}

// begin does the bookkeeping of a proxied request: it counts the request
// as active and in flight, records its answer, starts its server span and
// gives it a request ID (the caller's, else a new one). end, deferred by
// the caller, records the request's metrics and ends the span.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request) (rec *recorder, _ *http.Request, reqID string, start time.Time, end func()) {
	start = time.Now()
	h.active.Add(1)
	h.o.Metrics.inflightAdd(1)
	rec = &recorder{ResponseWriter: w}
	r, span := h.serverSpan(r, "router.request")
	reqID = r.Header.Get(HeaderRequestID)
	if reqID == "" {
		reqID = newRequestID()
		r.Header.Set(HeaderRequestID, reqID)
	}
	return rec, r, reqID, start, func() {
		endSpan(span, rec.status())
		h.o.Metrics.request(rec.status(), time.Since(start).Seconds())
		if rec.hijacked {
			h.o.Metrics.hijackedClosed()
		}
		h.o.Metrics.inflightAdd(-1)
		h.active.Add(-1)
	}
}

// serveTarget resolves t and proxies r to it, or answers e (a refusal
// already made) or the refusal met on the way. It waits for t to become
// routable for ResolveWait, or until waitUntil when that is later (a
// claim-only request's ClaimWait).
func (h *Handler) serveTarget(rec *recorder, r *http.Request, start time.Time, reqID string, t Target, waitUntil time.Time, e *Error) {
	var ep Endpoint
	if e == nil {
		// The request's timeout covers any wait for its Sandbox too.
		deadline := start.Add(t.Timeout)
		wait := max(h.o.ResolveWait, time.Until(waitUntil))
		ep, e = h.resolveWaiting(r.Context(), t, wait, deadline)
		t.Timeout = time.Until(deadline) // none left: the proxy answers 504
	}
	if e == nil && ep.IP.IsValid() && !AllowedAddress(ep.IP, h.o.Limits.AllowLocalAddresses) {
		e = &Error{Status: http.StatusBadGateway, Reason: ReasonAddressForbidden,
			Detail: fmt.Sprintf("Could not connect to the backend sandbox: %s (address %s is not allowed).", t.ID, ep.IP)}
	}
	if e == nil && h.o.MaxRequestBodyBytes > 0 && r.Body != nil {
		if r.ContentLength > h.o.MaxRequestBodyBytes {
			e = &Error{Status: http.StatusRequestEntityTooLarge, Reason: ReasonTooLarge, Detail: "Request body too large."}
		}
		r.Body = http.MaxBytesReader(rec, r.Body, h.o.MaxRequestBodyBytes)
	}
	if e != nil {
		h.o.Metrics.refused(e)
		h.o.Log.V(1).Info("refused", "status", e.Status, "reason", e.Reason, "detail", e.Detail, "requestID", reqID)
		rec.Header().Set(HeaderRequestID, reqID)
		rec.Header().Set(HeaderNotForwarded, "true")
		WriteError(rec, e)
		return
	}
	if resolvedOnly(rec, r, reqID, ep) {
		return
	}
	if h.o.Activity != nil && ep.IdleTimeout > 0 && ep.SandboxUID != "" {
		key := resume.Key{Namespace: ep.Namespace, Name: ep.Sandbox, UID: ep.SandboxUID}
		end := h.o.Activity.Begin(key, resume.Interval(ep.IdleTimeout, h.o.ActivityInterval))
		defer end() // after the response, or the WebSocket session, ended
	}
	h.proxy(rec, r, t, ep, reqID)
}

func (h *Handler) proxy(w *recorder, r *http.Request, t Target, ep Endpoint, reqID string) {
	urlHost, hostHeader := h.o.Transport.Address(ep)
	tctx, span := h.clientSpan(r.Context(), t, ep, reqID)
	defer func() { endSpan(span, w.status()) }()
	ctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	timer := time.AfterFunc(t.Timeout, func() { cancel(errTimeout) })
	defer timer.Stop()
	if isUpgrade(r) {
		if h.o.WebSocketMaxLifetime > 0 {
			life := time.AfterFunc(h.o.WebSocketMaxLifetime, func() { cancel(errLifetime) })
			defer life.Stop()
		}
	} else {
		// Bound a slow client too, then leave the connection as found for
		// its next request.
		rc := http.NewResponseController(w)
		end := time.Now().Add(t.Timeout + deadlineGrace)
		_ = rc.SetReadDeadline(end)
		_ = rc.SetWriteDeadline(end)
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", urlHost // the path stays as sent, escapes included
			pr.Out.Host = hostHeader
			pr.Out.Header.Del("Authorization") // the caller's credentials are not the sandbox's business
			pr.Out.Header.Del(HeaderRuntimeToken)
			if h.o.RuntimeToken != "" {
				pr.Out.Header.Set(HeaderRuntimeToken, h.o.RuntimeToken)
			}
			if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
				pr.Out.Header["X-Forwarded-For"] = slices.Clone(xff)
			}
			pr.SetXForwarded()
			h.inject(pr.Out.Context(), pr.Out.Header)
		},
		Transport:     h.transportFor(r, ep),
		FlushInterval: -1, // stream: every write reaches the client at once
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				timer.Stop() // the timeout covered the handshake
			}
			if resp.Header.Get(HeaderRequestID) == "" {
				resp.Header.Set(HeaderRequestID, reqID)
			}
			// Which Sandbox answered (UID and name), as the router
			// checked it: a client that named it by claim pins its
			// next requests to it. Never what the sandbox itself says.
			resp.Header.Del(HeaderUID)
			resp.Header.Del(HeaderSandboxID)
			if ep.SandboxUID != "" {
				resp.Header.Set(HeaderUID, string(ep.SandboxUID))
				resp.Header.Set(HeaderSandboxID, ep.Sandbox)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			e := h.upstreamError(ctx, t, err)
			h.o.Log.Info("upstream failed", "sandbox", t.Namespace+"/"+t.ID, "pod", ep.Pod, "source", ep.Source,
				"status", e.Status, "error", err.Error(), "requestID", reqID)
			w.Header().Set(HeaderRequestID, reqID)
			if notForwarded(err) {
				w.Header().Set(HeaderNotForwarded, "true")
			}
			WriteError(w, e)
		},
		ErrorLog: h.errLog,
	}
	rp.ServeHTTP(w, r.WithContext(ctx))
}

// upstreamError classifies a failure between the router and the sandbox.
func (h *Handler) upstreamError(ctx context.Context, t Target, err error) *Error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Reason: ReasonTooLarge, Detail: "Request body too large."}
	case errors.Is(context.Cause(ctx), errTimeout), isTimeout(err):
		h.o.Metrics.upstreamError("timeout")
		return &Error{Status: http.StatusGatewayTimeout, Detail: "Timed out waiting for the backend sandbox: " + t.ID}
	case notForwarded(err):
		h.o.Metrics.upstreamError("dial")
	default:
		h.o.Metrics.upstreamError("other")
	}
	return &Error{Status: http.StatusBadGateway, Detail: "Could not connect to the backend sandbox: " + t.ID}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isUpgrade reports a request asking to switch protocols (WebSocket).
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// Drain waits until no request is being served (WebSocket sessions
// included) or ctx ends.
func (h *Handler) Drain(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for h.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d requests still open: %w", h.active.Load(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logWriter sends the reverse proxy's own log lines to a logr.Logger.
type logWriter struct{ log logr.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	l.log.V(1).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
