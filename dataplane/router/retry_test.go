package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type flakyRT struct {
	fails  int
	errFor func(i int) error
	calls  int
	bodies []string
}

func (f *flakyRT) RoundTrip(req *http.Request) (*http.Response, error) {
	f.calls++
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		f.bodies = append(f.bodies, string(b))
	}
	if f.calls <= f.fails {
		return nil, f.errFor(f.calls)
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// fastRetries retry at once (the schedule itself is TestRetrySchedule's).
var fastRetries = UpstreamRetries{Max: 3, Initial: time.Millisecond, MaxDelay: 2 * time.Millisecond}

func TestRetriesWhatNeverReachedTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		calls int
		ok    bool
	}{
		{"direct refused", &netErr{syscall.ECONNREFUSED}, 3, true},
		{"not dialled", &net.OpError{Op: "dial", Net: "portforward", Err: errors.New("port-forward to pod ns/p: upgrade failed")}, 3, true},
		{"kubelet refused", errors.New("port-forward to ns/p:8888: error forwarding port 8888: dial tcp4 127.0.0.1:8888: connect: connection refused"), 3, true},
		{"kwok, no forward yet", errors.New(`error forwarding port 8888 to pod p/ns, uid : no forward found for port 8888 in pod "ns/p"`), 3, true},
		{"a dial that timed out is not tried again", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, 1, false},
		{"a connection that ended may have reached the sandbox", errors.New("EOF"), 1, false},
		{"nor one reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &flakyRT{fails: 2, errFor: func(int) error { return tc.err }}
			retried := 0
			u := &upstreamRetry{next: rt, retries: fastRetries, onRetry: func() { retried++ }}
			body := `{"command":"echo hi"}`
			req, _ := http.NewRequest(http.MethodPost, "http://sandbox/execute", strings.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			resp, err := u.RoundTrip(req)
			if (err == nil) != tc.ok || rt.calls != tc.calls || retried != tc.calls-1 {
				t.Fatalf("RoundTrip = %v after %d calls (%d counted retries); want ok=%v after %d", err, rt.calls, retried, tc.ok, tc.calls)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
			for i, b := range rt.bodies {
				if b != body {
					t.Errorf("try %d sent body %q; want %q each time", i, b, body)
				}
			}
		})
	}
}

func TestRetriesStopAtTheirMost(t *testing.T) {
	rt := &flakyRT{fails: 1 << 30, errFor: func(i int) error { return fmt.Errorf("try %d: connection refused", i) }}
	u := &upstreamRetry{next: rt, retries: fastRetries}
	req, _ := http.NewRequest(http.MethodGet, "http://sandbox/", nil)
	if _, err := u.RoundTrip(req); err == nil || rt.calls != 1+fastRetries.Max {
		t.Fatalf("RoundTrip = %v after %d calls; want the refusal after %d", err, rt.calls, 1+fastRetries.Max)
	}
	rt = &flakyRT{fails: 1 << 30, errFor: func(int) error { return errors.New("connection refused") }}
	u = &upstreamRetry{next: rt, retries: UpstreamRetries{}}
	if _, err := u.RoundTrip(req); err == nil || rt.calls != 1 {
		t.Fatalf("--upstream-max-retries=0: %v after %d calls; want one", err, rt.calls)
	}
}

func TestRetrySchedule(t *testing.T) {
	var got []time.Duration
	for i := 0; ; i++ {
		d, ok := DefaultUpstreamRetries.wait(i)
		if !ok {
			break
		}
		got = append(got, d)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits %v; want upstream's %v", got, want)
	}
	long := UpstreamRetries{Max: 6, Initial: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}
	if d, _ := long.wait(5); d != 300*time.Millisecond {
		t.Errorf("the sixth wait is %s; want it held at the most, 300ms", d)
	}
}

func TestAfterResumeRetriesUntilItsDeadline(t *testing.T) {
	rt := &flakyRT{fails: 1 << 30, errFor: func(i int) error { return fmt.Errorf("try %d: connection refused", i) }}
	u := &upstreamRetry{next: rt, retries: fastRetries, until: time.Now().Add(350 * time.Millisecond)}
	req, _ := http.NewRequest(http.MethodGet, "http://sandbox/", nil)
	began := time.Now()
	if _, err := u.RoundTrip(req); err == nil || time.Since(began) > 2*time.Second {
		t.Fatalf("RoundTrip = %v after %s; want the refusal once the deadline passed", err, time.Since(began))
	}
	if rt.calls < 2 {
		t.Errorf("%d tries before the deadline; want a few", rt.calls)
	}
	// A body that cannot be sent again is sent once.
	rt = &flakyRT{fails: 1, errFor: func(int) error { return errors.New("connection refused") }}
	u = &upstreamRetry{next: rt, retries: fastRetries, until: time.Now().Add(10 * time.Second)}
	req, _ = http.NewRequest(http.MethodPost, "http://sandbox/upload", io.NopCloser(strings.NewReader("data")))
	req.GetBody = nil
	if _, err := u.RoundTrip(req); err == nil || rt.calls != 1 {
		t.Fatalf("a body without GetBody: %v after %d calls; want the error, one call", err, rt.calls)
	}
}

// TestNotForwardedAnswers: a client learns which failures never reached
// the sandbox (X-Sandbox-Not-Forwarded), so it may send even a command
// again; a sandbox that got the request and failed is never marked.
func TestNotForwardedAnswers(t *testing.T) {
	refusing := refusedPort(t)
	var got atomic.Int64
	hangsUp := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		c, _, _ := http.NewResponseController(w).Hijack()
		_ = c.Close()
	}))
	r := newTestRouter(t, func(o *Options) { o.UpstreamRetries = fastRetries })
	command := `{"command":"echo hi"}`

	resp, body := do(t, r, http.MethodPost, "/execute", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": refusing}, strings.NewReader(command))
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(HeaderNotForwarded) != "true" {
		t.Errorf("nothing listening: %d %s, %s %q; want 502 marked not forwarded", resp.StatusCode, body, HeaderNotForwarded, resp.Header.Get(HeaderNotForwarded))
	}
	if n := testutil.ToFloat64(r.metrics.upstreamRetries.WithLabelValues("default")); n != float64(fastRetries.Max) {
		t.Errorf("sandbox_router_upstream_retries_total = %v; want %d", n, fastRetries.Max)
	}

	resp, body = do(t, r, http.MethodPost, "/execute", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": hangsUp}, strings.NewReader(command))
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(HeaderNotForwarded) != "" || got.Load() != 1 {
		t.Errorf("a sandbox that got the command and hung up: %d %s, %s %q, got it %d times; want 502 unmarked, sent once",
			resp.StatusCode, body, HeaderNotForwarded, resp.Header.Get(HeaderNotForwarded), got.Load())
	}

	refuse := newTestRouter(t, func(o *Options) {
		o.Resolver = ResolverFunc(func(context.Context, Target) (Endpoint, error) {
			return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonNotReady, Detail: "not ready"}
		})
	})
	resp, _ = do(t, refuse, http.MethodPost, "/execute", map[string]string{"X-Sandbox-ID": "box"}, strings.NewReader(command))
	if resp.Header.Get(HeaderNotForwarded) != "true" {
		t.Errorf("a refusal: %s %q; want true", HeaderNotForwarded, resp.Header.Get(HeaderNotForwarded))
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

type netErr struct{ errno syscall.Errno }

func (e *netErr) Error() string { return "dial tcp 10.0.0.1:8888: " + e.errno.Error() }
func (e *netErr) Unwrap() error { return e.errno }

// TestRetriesWithABodyLimit: with --max-request-body-bytes (on by default)
// every request's body is wrapped; a GET is still sent again, and a
// request a front door makes with no body at all (ServeTarget, as the E2B
// API's health check does) is served, not a panic.
func TestRetriesWithABodyLimit(t *testing.T) {
	refusing := refusedPort(t)
	r := newTestRouter(t, func(o *Options) {
		o.UpstreamRetries, o.MaxRequestBodyBytes = fastRetries, 1<<20
	})
	resp, _ := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": refusing}, nil)
	if n := testutil.ToFloat64(r.metrics.upstreamRetries.WithLabelValues("default")); resp.StatusCode != http.StatusBadGateway || n != float64(fastRetries.Max) {
		t.Errorf("a GET to a refused port: %d after %v retries; want 502 after %d", resp.StatusCode, n, fastRetries.Max)
	}

	port, _ := strconv.Atoi(refusing)
	h := NewHandler(Options{
		Resolver: ResolverFunc(func(_ context.Context, target Target) (Endpoint, error) {
			return Endpoint{Namespace: target.Namespace, Sandbox: target.ID, Pod: target.ID, PodUID: "pod-uid",
				IP: netip.MustParseAddr("127.0.0.1"), Port: target.Port, Source: SourceCache}, nil
		}),
		Transport: NewTransport(nil), Limits: Limits{DefaultTimeout: 5 * time.Second, MaxTimeout: 5 * time.Second, AllowLocalAddresses: true},
		UpstreamRetries: fastRetries, MaxRequestBodyBytes: 1 << 20,
	})
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/health"}, Header: http.Header{}} // no Body at all
	rec := httptest.NewRecorder()
	h.ServeTarget(rec, req.WithContext(context.Background()), Target{Namespace: "team", ID: "box", Port: port})
	if rec.Code != http.StatusBadGateway || rec.Header().Get(HeaderNotForwarded) != "true" {
		t.Errorf("a front door's request without a body: %d %q; want 502 marked not forwarded", rec.Code, rec.Header().Get(HeaderNotForwarded))
	}
}
