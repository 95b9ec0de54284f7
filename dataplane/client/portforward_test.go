package client

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// fakeAPIServer serves pods/portforward for one Pod as a kubelet does
// (SPDY, protocol portforward.k8s.io, an error and a data stream per
// connection, paired by requestID), forwarding port 8888 to target (or, from
// newFakeAPIServerPorts, each port to its own target).
type fakeAPIServer struct {
	upgrades atomic.Int32
	mu       sync.Mutex
	conns    []httpstream.Connection
}

// drop closes every port-forward connection, as an API server restart does.
func (f *fakeAPIServer) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

func newFakeAPIServer(t *testing.T, pod, target string) (*fakeAPIServer, *httptest.Server) {
	return newFakeAPIServerPorts(t, pod, map[string]string{"8888": target})
}

func newFakeAPIServerPorts(t *testing.T, pod string, targets map[string]string) (*fakeAPIServer, *httptest.Server) {
	f := &fakeAPIServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/portforward") {
			f.upgrades.Add(1)
		}
		if r.URL.Path != "/api/v1/namespaces/team-a/pods/"+pod+"/portforward" {
			writeJSON(w, 404, map[string]any{"kind": "Status", "status": "Failure", "reason": "NotFound",
				"message": `pods "x" not found`, "code": 404})
			return
		}
		if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
			return
		}
		streams := make(chan httpstream.Stream, 16)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return
		}
		defer func() { _ = conn.Close() }()
		f.mu.Lock()
		f.conns = append(f.conns, conn)
		f.mu.Unlock()
		pending := map[string]httpstream.Stream{}
		for {
			select {
			case <-conn.CloseChan():
				return
			case s := <-streams:
				id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
				other, ok := pending[id]
				if !ok {
					pending[id] = s
					continue
				}
				delete(pending, id)
				errS, data := other, s
				if s.Headers().Get(corev1.StreamType) == corev1.StreamTypeError {
					errS, data = s, other
				}
				go forward(errS, data, targets)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func forward(errS, data httpstream.Stream, targets map[string]string) {
	defer func() { _ = errS.Close() }()
	defer func() { _ = data.Close() }()
	port := data.Headers().Get(corev1.PortHeader)
	target, ok := targets[port]
	if !ok {
		served := slices.Sorted(maps.Keys(targets))
		_, _ = io.WriteString(errS, "unable to do port forwarding: port "+port+" is not "+strings.Join(served, " or "))
		return
	}
	c, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = io.WriteString(errS, "error forwarding port "+port+": "+err.Error())
		return
	}
	defer func() { _ = c.Close() }()
	go func() { _, _ = io.Copy(c, data) }()
	_, _ = io.Copy(data, c)
}

func portForwardSandbox(t *testing.T, apiURL, pod string, opts ...Option) (*Sandbox, error) {
	t.Helper()
	c, err := New(&rest.Config{Host: apiURL}, append([]Option{fast}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	o := c.options(nil)
	s := &Sandbox{namespace: "team-a", name: "sb-1", podName: pod, client: c}
	if err := s.connect(ctxFor(t), &o); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, nil
}

func TestPortForward(t *testing.T) {
	rt, runtimeSrv := newFakeRuntime(t)
	api, apiSrv := newFakeAPIServer(t, "sb-1-pod", runtimeSrv.Listener.Addr().String())
	sb, err := portForwardSandbox(t, apiSrv.URL, "sb-1-pod", WithBearerToken("not-for-pods"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ctx := ctxFor(t)
	for range 3 {
		if res, err := sb.Run(ctx, "echo through the tunnel"); err != nil || res.Stdout != "through the tunnel\n" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	}
	if err := sb.Write(ctx, "f.txt", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	rc, err := sb.Read(ctx, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "data" {
		t.Fatalf("Read = %q", b)
	}
	if n := api.upgrades.Load(); n != 1 {
		t.Errorf("%d port-forward connections to the API server; want one, shared", n)
	}
	// A dropped connection is replaced, and no request (a Run is never
	// retried) goes to a stream of the old one.
	api.drop()
	time.Sleep(100 * time.Millisecond)
	if res, err := sb.Run(ctx, "echo again"); err != nil || res.Stdout != "again\n" {
		t.Fatalf("Run after the connection dropped = %+v, %v", res, err)
	}
	if n := api.upgrades.Load(); n != 2 {
		t.Errorf("%d port-forward connections; want a second after the drop", n)
	}
	for _, r := range rt.recorded() {
		if r.header.Get("Authorization") != "" || r.header.Get(HeaderSandboxID) != "" {
			t.Errorf("port-forward requests carry no token and no routing headers: %v", r.header)
		}
	}
	_ = sb.Close(ctx)
	if _, err := sb.Run(ctx, "echo"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

func TestPortForwardFailures(t *testing.T) {
	_, runtimeSrv := newFakeRuntime(t)
	api, apiSrv := newFakeAPIServer(t, "sb-1-pod", runtimeSrv.Listener.Addr().String())

	// The API server refuses (no such Pod): permanent, not retried.
	_, err := portForwardSandbox(t, apiSrv.URL, "other-pod")
	if err == nil || !strings.Contains(err.Error(), `pods "x" not found`) || api.upgrades.Load() != 1 {
		t.Fatalf("connect to a missing Pod = %v after %d upgrades; want the API server's message, once", err, api.upgrades.Load())
	}

	// Nothing listens on the port: the kubelet's message, after retries.
	api.upgrades.Store(0)
	_, err = portForwardSandbox(t, apiSrv.URL, "sb-1-pod", WithPort(9999))
	if err == nil || !strings.Contains(err.Error(), "port 9999 is not 8888") || !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("connect to a closed port = %v; want the kubelet's error", err)
	}
	if n := api.upgrades.Load(); n < 2 {
		t.Errorf("%d upgrades; a connection that reported an error is replaced", n)
	}
}
