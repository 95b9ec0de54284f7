package router

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// testRouter serves a Handler whose resolver sends every request to
// 127.0.0.1 at the requested port (a backend on this machine) unless the
// options say otherwise.
type testRouter struct {
	*httptest.Server
	metrics  *Metrics
	resolves atomic.Int64
}

func newTestRouter(t *testing.T, configure func(*Options)) *testRouter {
	t.Helper()
	tr := &testRouter{metrics: NewMetrics(prometheus.NewRegistry())}
	o := Options{
		Resolver: ResolverFunc(func(_ context.Context, target Target) (Endpoint, error) {
			return Endpoint{Namespace: target.Namespace, Sandbox: target.ID, Pod: target.ID, PodUID: "pod-uid",
				IP: netip.MustParseAddr("127.0.0.1"), Port: target.Port, Source: SourceCache}, nil
		}),
		Transport: NewTransport(nil),
		Limits:    Limits{DefaultTimeout: 10 * time.Second, MaxTimeout: 20 * time.Second, AllowLocalAddresses: true},
		Metrics:   tr.metrics,
		Log:       testr.New(t),
	}
	if configure != nil {
		configure(&o)
	}
	o.Resolver = countingResolver{inner: o.Resolver, n: &tr.resolves}
	h := NewHandler(o)
	tr.Server = httptest.NewUnstartedServer(h)
	tr.Config.ConnState = tr.metrics.ConnState
	tr.Start()
	t.Cleanup(tr.Close)
	t.Cleanup(o.Transport.CloseIdleConnections)
	return tr
}

// countingResolver counts the looks of the Resolver it wraps, for a
// Sandbox and (ClaimFinder) for a claim's.
type countingResolver struct {
	inner Resolver
	n     *atomic.Int64
}

func (c countingResolver) Resolve(ctx context.Context, t Target) (Endpoint, error) {
	c.n.Add(1)
	return c.inner.Resolve(ctx, t)
}

func (c countingResolver) SandboxOfClaim(ctx context.Context, ns string, claimUID types.UID) (string, types.UID, error) {
	c.n.Add(1)
	f, ok := c.inner.(ClaimFinder)
	if !ok {
		return "", "", &Error{Status: http.StatusNotImplemented, Reason: ReasonNotFound, Detail: "The test's resolver finds no claims."}
	}
	return f.SandboxOfClaim(ctx, ns, claimUID)
}

// backendPort starts a backend and returns its port on 127.0.0.1.
func backendPort(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// refusedPort returns a port on 127.0.0.1 that nothing listens on (one
// just given up), so that a connection to it is refused.
func refusedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	return port
}

func do(t *testing.T, r *testRouter, method, path string, headers map[string]string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := r.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHealthz(t *testing.T) {
	r := newTestRouter(t, nil)
	resp, body := do(t, r, http.MethodGet, "/healthz", nil, nil)
	if resp.StatusCode != http.StatusOK || body != `{"status":"ok"}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("/healthz: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if r.resolves.Load() != 0 {
		t.Error("/healthz was resolved")
	}
}

func TestErrorShapes(t *testing.T) {
	r := newTestRouter(t, func(o *Options) {
		o.Resolver = ResolverFunc(func(context.Context, Target) (Endpoint, error) {
			return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Detail: "Sandbox team/box not found."}
		})
	})
	for _, tc := range []struct {
		headers map[string]string
		status  int
		body    string
	}{
		{nil, http.StatusBadRequest, `{"detail":"X-Sandbox-ID header is required."}`},
		{map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "bad namespace!"}, http.StatusBadRequest, `{"detail":"Invalid namespace format."}`},
		{map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": "x"}, http.StatusBadRequest, `{"detail":"Invalid port format."}`},
		{map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team"}, http.StatusNotFound, `{"detail":"Sandbox team/box not found."}`},
	} {
		resp, body := do(t, r, http.MethodPost, "/execute", tc.headers, strings.NewReader(`{"command":"ls"}`))
		if resp.StatusCode != tc.status || body != tc.body || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get(HeaderRequestID) == "" {
			t.Errorf("%v: %d %q (content type %q, request id %q), want %d %s", tc.headers, resp.StatusCode, body,
				resp.Header.Get("Content-Type"), resp.Header.Get(HeaderRequestID), tc.status, tc.body)
		}
	}
	if got := testutil.ToFloat64(r.metrics.resolutionFailures.WithLabelValues(ReasonNotFound)); got != 1 {
		t.Errorf("resolution failures counted: %v, want 1", got)
	}
	if got := countedRequests(r, "4xx", 4); got != 4 {
		t.Errorf("4xx requests counted: %v, want 4", got)
	}
}

func TestForwarding(t *testing.T) {
	type seen struct {
		method, uri, host, body string
		header                  http.Header
	}
	got := make(chan seen, 1)
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Clone()}
		w.Header().Set("X-From-Sandbox", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	}))
	r := newTestRouter(t, nil)
	resp, body := do(t, r, http.MethodPost, "/download/dir%2Ffile%2E%2E?marker=%2E", map[string]string{
		"X-Sandbox-ID": "box", "X-Sandbox-Port": port, "Authorization": "Bearer secret", "X-Request-ID": "req-1",
		"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-App": "keep-me",
		"Connection": "X-Hop", "X-Hop": "drop-me",
	}, strings.NewReader("payload"))
	if resp.StatusCode != http.StatusCreated || body != "made" || resp.Header.Get("X-From-Sandbox") != "yes" || resp.Header.Get(HeaderRequestID) != "req-1" {
		t.Fatalf("response %d %q %v", resp.StatusCode, body, resp.Header)
	}
	s := <-got
	if s.method != http.MethodPost || s.uri != "/download/dir%2Ffile%2E%2E?marker=%2E" || s.body != "payload" || s.host != "127.0.0.1:"+port {
		t.Errorf("the sandbox saw %s %s (Host %s) body %q", s.method, s.uri, s.host, s.body)
	}
	for k, want := range map[string]string{
		"Authorization": "", "X-Request-Id": "req-1", "Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"X-App": "keep-me", "X-Hop": "", "X-Forwarded-For": "127.0.0.1", "X-Sandbox-Id": "box",
	} {
		if v := s.header.Get(k); v != want {
			t.Errorf("the sandbox saw %s: %q, want %q", k, v, want)
		}
	}

	// Without a request ID the router makes one, passes it on and returns it.
	resp, _ = do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": port}, nil)
	s = <-got
	if id := resp.Header.Get(HeaderRequestID); id == "" || s.header.Get(HeaderRequestID) != id {
		t.Errorf("request id: returned %q, the sandbox saw %q", id, s.header.Get(HeaderRequestID))
	}
	if n := countedRequests(r, "2xx", 2); n != 2 {
		t.Errorf("2xx requests counted: %v, want 2", n)
	}
}

func TestStreaming(t *testing.T) {
	release := make(chan struct{})
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	r := newTestRouter(t, nil)
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/events", nil)
	req.Header.Set(HeaderSandboxID, "box")
	req.Header.Set(HeaderPort, port)
	resp, err := r.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	lines := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() { l, _ := lines.ReadString('\n'); first <- l }()
	select {
	case l := <-first:
		if l != "first\n" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first line did not arrive before the response ended: the router buffers")
	}
	close(release)
	if l, _ := lines.ReadString('\n'); l != "second\n" {
		t.Errorf("second line %q", l)
	}
}

func TestUpstreamFailures(t *testing.T) {
	closed := backendPort(t, http.NotFoundHandler())
	refused := refusedPort(t)
	slow := backendPort(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	r := newTestRouter(t, nil)
	resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": refused}, nil)
	if resp.StatusCode != http.StatusBadGateway || body != `{"detail":"Could not connect to the backend sandbox: box"}` {
		t.Errorf("nothing listening: %d %s", resp.StatusCode, body)
	}
	start := time.Now()
	resp, body = do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": slow, "X-Sandbox-Timeout": "0.3"}, nil)
	if resp.StatusCode != http.StatusGatewayTimeout || body != `{"detail":"Timed out waiting for the backend sandbox: box"}` || time.Since(start) > 5*time.Second {
		t.Errorf("a slow sandbox: %d %s after %s", resp.StatusCode, body, time.Since(start))
	}
	if testutil.ToFloat64(r.metrics.upstreamErrors.WithLabelValues("dial")) != 1 || testutil.ToFloat64(r.metrics.upstreamErrors.WithLabelValues("timeout")) != 1 {
		t.Error("upstream errors not counted by reason")
	}

	strict := newTestRouter(t, func(o *Options) { o.Limits.AllowLocalAddresses = false })
	resp, body = do(t, strict, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": closed}, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "127.0.0.1 is not allowed") {
		t.Errorf("a loopback pod IP without --allow-local-addresses: %d %s", resp.StatusCode, body)
	}
}

func TestRequestBodyLimit(t *testing.T) {
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	r := newTestRouter(t, func(o *Options) { o.MaxRequestBodyBytes = 8 })
	headers := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": port}
	if resp, _ := do(t, r, http.MethodPost, "/upload", headers, strings.NewReader("12345678")); resp.StatusCode != http.StatusOK {
		t.Errorf("a body at the limit: %d", resp.StatusCode)
	}
	if resp, body := do(t, r, http.MethodPost, "/upload", headers, strings.NewReader("123456789")); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d %s", resp.StatusCode, body)
	}
	chunked := io.MultiReader(strings.NewReader("12345"), strings.NewReader("67890")) // no length: sent chunked
	if resp, body := do(t, r, http.MethodPost, "/upload", headers, chunked); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the limit: %d %s", resp.StatusCode, body)
	}
}

func TestAuthorizerRunsFirst(t *testing.T) {
	var asked atomic.Value
	r := newTestRouter(t, func(o *Options) {
		o.Authorizer = authorizerFunc(func(_ context.Context, _ *http.Request, ns, name string) *Error {
			asked.Store(ns + "/" + name)
			return &Error{Status: http.StatusUnauthorized, Reason: ReasonUnauthenticated, Detail: "Missing or invalid Authorization header."}
		})
	})
	resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team"}, nil)
	if resp.StatusCode != http.StatusUnauthorized || body != `{"detail":"Missing or invalid Authorization header."}` || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("refused caller: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if asked.Load() != "team/box" || r.resolves.Load() != 0 {
		t.Errorf("the authorizer was asked about %v and the resolver called %d times; want team/box and 0", asked.Load(), r.resolves.Load())
	}
	if testutil.ToFloat64(r.metrics.authFailures.WithLabelValues(ReasonUnauthenticated)) != 1 {
		t.Error("auth failure not counted")
	}
}

type authorizerFunc func(ctx context.Context, r *http.Request, namespace, name string) *Error

func (f authorizerFunc) Authorize(ctx context.Context, r *http.Request, namespace, name string) *Error {
	return f(ctx, r, namespace, name)
}

func TestResolveWait(t *testing.T) {
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	var calls atomic.Int64
	flaky := func(retry bool) ResolverFunc {
		return func(_ context.Context, t Target) (Endpoint, error) {
			if calls.Add(1) <= 2 {
				return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Detail: "not yet", Retry: retry}
			}
			return Endpoint{Pod: "box", IP: netip.MustParseAddr("127.0.0.1"), Port: t.Port}, nil
		}
	}
	headers := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": port}
	r := newTestRouter(t, func(o *Options) { o.Resolver, o.ResolveWait = flaky(true), 2*time.Second })
	if resp, body := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("a Sandbox Ready a moment later: %d %s", resp.StatusCode, body)
	}
	calls.Store(0)
	r = newTestRouter(t, func(o *Options) { o.Resolver, o.ResolveWait = flaky(false), 2*time.Second })
	if resp, _ := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusConflict || calls.Load() != 1 {
		t.Errorf("a final refusal: %d after %d lookups, want 409 after 1", resp.StatusCode, calls.Load())
	}
	calls.Store(0)
	r = newTestRouter(t, func(o *Options) { o.Resolver = flaky(true) })
	if resp, _ := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusConflict || calls.Load() != 1 {
		t.Errorf("without a wait: %d after %d lookups, want 409 after 1", resp.StatusCode, calls.Load())
	}
}

// TestRefusesUnroutableSandboxes goes through the cache resolver: a warm
// pool member nobody claimed and a Sandbox whose Pod is not Ready never
// reach the sandbox.
func TestRefusesUnroutableSandboxes(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	claimed, warm, starting := testSandbox("claimed", "SandboxClaim"), testSandbox("pool-b4c9d", "SandboxWarmPool"), testSandbox("starting", "")
	notReady := testPod(starting, "starting", "127.0.0.1")
	notReady.Status.Conditions[0].Status = "False"
	reader := testReader(t, claimed, testPod(claimed, "claimed", "127.0.0.1"), warm, testPod(warm, "pool-b4c9d", "127.0.0.1"), starting, notReady)
	r := newTestRouter(t, func(o *Options) { o.Resolver = &CacheResolver{Reader: reader} })
	for id, want := range map[string]int{"claimed": http.StatusOK, "pool-b4c9d": http.StatusForbidden, "starting": http.StatusConflict, "gone": http.StatusNotFound} {
		resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": id, "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port}, nil)
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", id, resp.StatusCode, body, want)
		}
	}
	if reached.Load() != 1 {
		t.Errorf("the sandbox was reached %d times, want once (the claimed one)", reached.Load())
	}
	if testutil.ToFloat64(r.metrics.resolutionFailures.WithLabelValues(ReasonWarmMember)) != 1 ||
		testutil.ToFloat64(r.metrics.resolutionFailures.WithLabelValues(ReasonNotReady)) != 1 {
		t.Error("refusals not counted by reason")
	}
}

func TestDrain(t *testing.T) {
	h := NewHandler(Options{})
	h.active.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if err := h.Drain(ctx); err == nil || !strings.Contains(err.Error(), strconv.Itoa(1)) {
		t.Errorf("Drain with a request open: %v", err)
	}
	h.active.Add(-1)
	if err := h.Drain(context.Background()); err != nil {
		t.Errorf("Drain with none: %v", err)
	}
}

// countedRequests reads the requests counter of a code class, waiting up
// to 5 s for it to reach want: the handler counts a request once it
// returns, which may be a moment after the client has read the response.
func countedRequests(r *testRouter, class string, want float64) float64 {
	c := r.metrics.requests.WithLabelValues(class)
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(c) < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return testutil.ToFloat64(c)
}
