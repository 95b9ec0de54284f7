package client

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// notForwardingRouter answers the first refuse /execute requests itself,
// 502 marked as never forwarded when marked, and passes the rest on.
type notForwardingRouter struct {
	mu      sync.Mutex
	refuse  int
	marked  bool
	seen    int
	runtime http.Handler
}

func (n *notForwardingRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.seen++
	refuse := r.URL.Path == "/execute" && n.refuse > 0
	if refuse {
		n.refuse--
	}
	n.mu.Unlock()
	if refuse {
		if n.marked {
			w.Header().Set(HeaderNotForwarded, "true")
		}
		writeJSON(w, http.StatusBadGateway, map[string]string{"detail": "Could not connect to the backend sandbox: sb-1"})
		return
	}
	n.runtime.ServeHTTP(w, r)
}

func (n *notForwardingRouter) requests() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen
}

// TestRunIsSentAgainOnlyWhenItNeverReachedTheSandbox: a router's answer
// marked X-Sandbox-Not-Forwarded sends even Run again; an unmarked 502 (the
// runtime may have run the command) and a mark from anything but a router
// do not.
func TestRunIsSentAgainOnlyWhenItNeverReachedTheSandbox(t *testing.T) {
	rt, runtimeSrv := newFakeRuntime(t)
	executes := func() int {
		n := 0
		for _, r := range rt.recorded() {
			if r.rawPath == "/execute" {
				n++
			}
		}
		return n
	}
	n := &notForwardingRouter{runtime: runtimeSrv.Config.Handler, refuse: 2, marked: true}
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	ctx := ctxFor(t)

	sb := dial(t, WithRouter(srv.URL))
	if res, err := sb.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" || executes() != 1 {
		t.Fatalf("Run after two answers marked not forwarded = %+v, %v, the runtime ran it %d times; want it run once", res, err, executes())
	}

	n.mu.Lock()
	n.refuse, n.marked = 1, false
	n.mu.Unlock()
	before := n.requests()
	var herr *HTTPError
	if _, err := sb.Run(ctx, "echo hi"); !errors.As(err, &herr) || herr.StatusCode != http.StatusBadGateway || n.requests()-before != 1 {
		t.Fatalf("Run on an unmarked 502 = %v after %d requests; want the 502, sent once", err, n.requests()-before)
	}

	direct := dial(t, WithBaseURL(srv.URL))
	n.mu.Lock()
	n.refuse, n.marked = 1, true
	n.mu.Unlock()
	before = n.requests()
	if _, err := direct.Run(ctx, "echo hi"); err == nil || n.requests()-before != 1 {
		t.Fatalf("Run to a base URL answering a mark = %v after %d requests; want the error, sent once (only a router is believed)", err, n.requests()-before)
	}
}

// TestCreateThroughARouterSendsNoHealthCheck: a Sandbox Create has just
// seen Ready is not asked for its health through a router; the first call
// is the first request. Open and Dial still check.
func TestCreateThroughARouterSendsNoHealthCheck(t *testing.T) {
	_, runtimeSrv := newFakeRuntime(t)
	n := &notForwardingRouter{runtime: runtimeSrv.Config.Handler}
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	ctx := ctxFor(t)

	for _, tc := range []struct {
		name      string
		seenReady bool
		starting  bool
		want      int
	}{
		{"seen Ready by Create", true, false, 0},
		{"opened", false, false, 1},
		{"resumed by Create", true, true, 1},
	} {
		o := defaultOptions()
		for _, f := range []Option{fast, WithRouter(srv.URL)} {
			f(&o)
		}
		o.seenReady, o.starting = tc.seenReady, tc.starting
		s := &Sandbox{namespace: "team-a", name: "sb-1", podName: "sb-1"}
		before := n.requests()
		if err := s.connect(ctx, &o); err != nil {
			t.Fatalf("%s: connect: %v", tc.name, err)
		}
		if got := n.requests() - before; got != tc.want {
			t.Errorf("%s: %d requests on connect; want %d", tc.name, got, tc.want)
		}
		if res, err := s.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" {
			t.Errorf("%s: Run = %+v, %v", tc.name, res, err)
		}
	}
}
