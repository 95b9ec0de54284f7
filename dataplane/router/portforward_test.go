package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// fakeKubelet plays the far end of pods/portforward: each data stream is a
// TCP connection to 127.0.0.1:<port>, and a port nobody listens on is
// reported on the error stream, as the kubelet does.
type fakeKubelet struct {
	dials atomic.Int64
	mu    sync.Mutex
	conns []*fakeConn
}

func (k *fakeKubelet) dial(namespace, name string) (streamhttp.Connection, error) {
	k.dials.Add(1)
	if name == "unreachable" {
		return nil, errors.New("upgrade failed")
	}
	c := &fakeConn{pod: name, closed: make(chan bool), errs: map[string]*io.PipeWriter{}, errsR: map[string]*io.PipeReader{}}
	k.mu.Lock()
	k.conns = append(k.conns, c)
	k.mu.Unlock()
	return c, nil
}

type fakeConn struct {
	pod     string
	mu      sync.Mutex
	closed  chan bool
	once    sync.Once
	errs    map[string]*io.PipeWriter
	errsR   map[string]*io.PipeReader
	tcp     []net.Conn
	idleFor time.Duration
}

func (c *fakeConn) CreateStream(h http.Header) (streamhttp.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		return nil, errors.New("connection closed")
	default:
	}
	id := h.Get(corev1.PortForwardRequestIDHeader)
	// The pair's error pipe, made by whichever of its streams comes first
	// (a kubelet pairs them in either order).
	if c.errs[id] == nil {
		c.errsR[id], c.errs[id] = io.Pipe()
	}
	switch h.Get(corev1.StreamType) {
	case corev1.StreamTypeError:
		w := c.errs[id]
		return &fakeStream{r: c.errsR[id], reset: func() { _ = w.Close() }, h: h.Clone()}, nil
	case corev1.StreamTypeData:
		errs := c.errs[id]
		tcp, err := net.Dial("tcp", "127.0.0.1:"+h.Get(corev1.PortHeader))
		if err != nil {
			go func() {
				_, _ = fmt.Fprintf(errs, "error forwarding port %s to pod: connection refused", h.Get(corev1.PortHeader))
				_ = errs.Close()
			}()
			return &fakeStream{r: strings.NewReader(""), h: h.Clone()}, nil
		}
		c.tcp = append(c.tcp, tcp)
		return &fakeStream{r: endsWith(tcp, func() { _ = errs.Close() }), w: tcp, reset: func() { _ = tcp.Close(); _ = errs.Close() },
			closeWrite: func() { _ = tcp.(*net.TCPConn).CloseWrite() }, h: h.Clone()}, nil
	}
	return nil, fmt.Errorf("unknown stream type %q", h.Get(corev1.StreamType))
}

func (c *fakeConn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		close(c.closed)
		for _, t := range c.tcp {
			_ = t.Close()
		}
		for _, w := range c.errs {
			_ = w.Close()
		}
	})
	return nil
}

func (c *fakeConn) CloseChan() <-chan bool             { return c.closed }
func (c *fakeConn) RemoveStreams(...streamhttp.Stream) {}
func (c *fakeConn) SetIdleTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idleFor = d
}
func (c *fakeConn) idle() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idleFor
}
func (c *fakeConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// endsWith calls done when r's reading ends (the kubelet closes the error
// stream when forwarding ends).
func endsWith(r io.Reader, done func()) io.Reader { return &endReader{r: r, done: done} }

type endReader struct {
	r    io.Reader
	done func()
	once sync.Once
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(e.done)
	}
	return n, err
}

type fakeStream struct {
	r          io.Reader
	w          io.Writer
	reset      func()
	closeWrite func()
	h          http.Header
}

func (s *fakeStream) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *fakeStream) Write(p []byte) (int, error) {
	if s.w == nil {
		return 0, errors.New("stream closed")
	}
	return s.w.Write(p)
}
func (s *fakeStream) Close() error {
	if s.closeWrite != nil {
		s.closeWrite()
	}
	return nil
}
func (s *fakeStream) Reset() error {
	if s.reset != nil {
		s.reset()
	}
	return nil
}
func (s *fakeStream) Headers() http.Header { return s.h }
func (s *fakeStream) Identifier() uint32   { return 0 }

// TestPortForward routes through the port-forward transport: one
// connection per Pod, shared by concurrent requests, dropped when the Pod
// goes or the connection fails, and a refused port answered 502.
func TestPortForward(t *testing.T) {
	var seenHost atomic.Value
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenHost.Store(r.Host)
		_, _ = io.WriteString(w, "via "+r.URL.Path)
	}))
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, refused, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()

	k := &fakeKubelet{}
	var pf *PortForward
	r := newTestRouter(t, func(o *Options) {
		pf = NewPortForward(k.dial, time.Minute, o.Metrics)
		o.Transport = NewTransport(pf)
		o.Limits.AllowLocalAddresses = false // the pod IP is never dialled
		o.Resolver = ResolverFunc(func(_ context.Context, target Target) (Endpoint, error) {
			return Endpoint{Namespace: "team", Sandbox: target.ID, Pod: target.ID, PodUID: types.UID("uid-" + target.ID),
				IP: netip.MustParseAddr("10.0.3.7"), Port: target.Port}, nil
		})
	})
	headers := func(pod, port string) map[string]string {
		return map[string]string{"X-Sandbox-ID": pod, "X-Sandbox-Port": port}
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/n" + strconv.Itoa(i)
			if resp, body := do(t, r, http.MethodGet, path, headers("box", port), nil); resp.StatusCode != http.StatusOK || body != "via "+path {
				t.Errorf("through the port-forward: %d %q", resp.StatusCode, body)
			}
		}()
	}
	wg.Wait()
	if k.dials.Load() != 1 {
		t.Errorf("%d port-forward connections for one pod, want 1", k.dials.Load())
	}
	if seenHost.Load() != "10.0.3.7:"+port {
		t.Errorf("the sandbox saw Host %v, want the pod's ip:port", seenHost.Load())
	}
	if k.conns[0].idle() != time.Minute || testutil.ToFloat64(r.metrics.portForwards) != 1 {
		t.Errorf("idle timeout %s, open forwards %v", k.conns[0].idle(), testutil.ToFloat64(r.metrics.portForwards))
	}

	// A port nobody listens on: the kubelet's message ends the request.
	if resp, body := do(t, r, http.MethodGet, "/", headers("box", refused), nil); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a refused port: %d %s", resp.StatusCode, body)
	}
	// The Pod is deleted: its connection goes; a new Pod of that name is dialled afresh.
	pf.Forget("uid-box")
	if !k.conns[0].isClosed() {
		t.Error("the connection of a deleted pod is still open")
	}
	if resp, _ := do(t, r, http.MethodGet, "/", headers("box", port), nil); resp.StatusCode != http.StatusOK || k.dials.Load() != 2 {
		t.Errorf("after the pod went: %d with %d dials, want 200 and 2", resp.StatusCode, k.dials.Load())
	}
	// The connection fails: it is dropped and made again.
	_ = k.conns[1].Close()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(r.metrics.portForwards) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if resp, _ := do(t, r, http.MethodGet, "/", headers("box", port), nil); resp.StatusCode != http.StatusOK || k.dials.Load() != 3 {
		t.Errorf("after the connection failed: %d with %d dials, want 200 and 3", resp.StatusCode, k.dials.Load())
	}
	// An API server that refuses the port-forward: 502. It and the refused
	// port are both failures to connect (reason dial).
	if resp, body := do(t, r, http.MethodGet, "/", headers("unreachable", port), nil); resp.StatusCode != http.StatusBadGateway ||
		resp.Header.Get(HeaderNotForwarded) != "true" || testutil.ToFloat64(r.metrics.upstreamErrors.WithLabelValues("dial")) != 2 {
		t.Errorf("a pod the API server cannot forward to: %d %s", resp.StatusCode, body)
	}
}

func TestPortForwardUnknownPod(t *testing.T) {
	pf := NewPortForward((&fakeKubelet{}).dial, 0, nil)
	if _, err := pf.DialPod(context.Background(), "nobody", 80); err == nil {
		t.Error("dialled a pod never named")
	}
	pf.Remember("uid-1", "team", "box")
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	p, _ := strconv.Atoi(port)
	c, err := pf.DialPod(context.Background(), "uid-1", p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("reading from a refused port: %v, want the kubelet's message", err)
	}
	_ = c.Close()
	pf.Forget("uid-1")
	if _, err := pf.DialPod(context.Background(), "uid-1", 80); err == nil {
		t.Error("dialled a forgotten pod")
	}
}
