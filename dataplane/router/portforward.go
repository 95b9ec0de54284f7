package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"

	"github.com/agentsandbox/reconciler/dataplane/pfstream"
)

// DialPodFunc opens a port-forward connection to a Pod.
type DialPodFunc func(namespace, name string) (streamhttp.Connection, error)

// PortForward reaches Pods through the API server's pods/portforward, as
// `kubectl port-forward` does, for clusters whose pod IPs the router cannot
// reach (kwok's are fake). It keeps one connection per Pod and opens a
// stream pair on it per TCP connection; a connection is dropped when it
// fails, stays idle for IdleTimeout, or its Pod is deleted (Forget).
type PortForward struct {
	dial        DialPodFunc
	idleTimeout time.Duration
	metrics     *Metrics

	mu    sync.Mutex
	pods  map[types.UID]podRef
	conns map[types.UID]*forward
	group singleflight.Group

	// warm are the Pods Prewarm keeps connected, at most prewarmMax.
	warm       map[types.UID]struct{}
	prewarmMax int
	retry      time.Duration // prewarmRetry; shorter in tests
	stop       chan struct{} // closed by Close
	stopOnce   sync.Once
}

type podRef struct{ namespace, name string }

// forward is the port-forward connection to one Pod.
type forward struct {
	conn   streamhttp.Connection
	nextID atomic.Int64
}

// NewPortForward returns a PortForward dialling with dial; see
// APIServerDialer for the real one.
func NewPortForward(dial DialPodFunc, idleTimeout time.Duration, m *Metrics) *PortForward {
	return &PortForward{dial: dial, idleTimeout: idleTimeout, metrics: m, pods: map[types.UID]podRef{}, conns: map[types.UID]*forward{},
		warm: map[types.UID]struct{}{}, stop: make(chan struct{}), retry: prewarmRetry}
}

// SetPrewarm sets how many Pods Prewarm keeps connected at most (0, the
// default, turns it off). Call it before the first Prewarm.
func (p *PortForward) SetPrewarm(most int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prewarmMax = most
}

// APIServerDialer dials pods/portforward of the API server cfg reaches:
// over WebSockets, falling back to SPDY where the API server does not
// upgrade to WebSockets (as kubectl does).
func APIServerDialer(cfg *rest.Config) (DialPodFunc, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyClient := &http.Client{Transport: rt}
	return func(namespace, name string) (streamhttp.Connection, error) {
		u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(name).SubResource("portforward").URL()
		ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
		if err != nil {
			return nil, err
		}
		d := portforward.NewFallbackDialerForStreaming(ws, spdy.NewDialerForStreaming(upgrader, spdyClient, http.MethodPost, u),
			func(err error) bool { return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err) })
		conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
		return conn, err
	}, nil
}

// Remember records which Pod a UID names, for DialPod.
func (p *PortForward) Remember(uid types.UID, namespace, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods[uid] = podRef{namespace, name}
}

// Forget drops what is kept for a Pod that is gone: its name and its
// connection (streams on it are reset).
func (p *PortForward) Forget(uid types.UID) {
	p.mu.Lock()
	f := p.conns[uid]
	delete(p.conns, uid)
	delete(p.pods, uid)
	delete(p.warm, uid)
	p.mu.Unlock()
	if f != nil {
		_ = f.conn.Close()
	}
}

// Close drops every connection and ends Prewarm (the router is stopping).
func (p *PortForward) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.mu.Lock()
	conns := p.conns
	p.conns = map[types.UID]*forward{}
	p.warm = map[types.UID]struct{}{}
	p.mu.Unlock()
	for _, f := range conns {
		_ = f.conn.Close()
	}
}

// DialPod opens a TCP connection to port of the Pod with uid (named by
// Remember) through its port-forward connection, making that first.
// Failures are *net.OpError dial errors.
func (p *PortForward) DialPod(ctx context.Context, uid types.UID, port int) (net.Conn, error) {
	p.mu.Lock()
	ref, known := p.pods[uid]
	p.mu.Unlock()
	addr := pfAddr(fmt.Sprintf("%s/%s:%d", ref.namespace, ref.name, port))
	if !known {
		return nil, &net.OpError{Op: "dial", Net: "portforward", Err: fmt.Errorf("no pod with uid %s", uid)}
	}
	for attempt := 0; ; attempt++ {
		f, err := p.forward(ctx, uid, ref)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: "portforward", Addr: addr, Err: err}
		}
		c, err := f.open(addr)
		if err == nil {
			return c, nil
		}
		// The connection died under us: make a new one, once.
		p.drop(uid, f)
		if attempt > 0 {
			return nil, &net.OpError{Op: "dial", Net: "portforward", Addr: addr, Err: err}
		}
	}
}

// forward returns the Pod's connection, dialling it if there is none; one
// dial per Pod at a time.
func (p *PortForward) forward(ctx context.Context, uid types.UID, ref podRef) (*forward, error) {
	p.mu.Lock()
	f := p.conns[uid]
	p.mu.Unlock()
	if f != nil {
		return f, nil
	}
	ch := p.group.DoChan(string(uid), func() (any, error) {
		conn, err := p.dial(ref.namespace, ref.name)
		if err != nil {
			return nil, fmt.Errorf("port-forward to pod %s/%s: %w", ref.namespace, ref.name, err)
		}
		f := &forward{conn: conn}
		p.mu.Lock()
		_, stillThere := p.pods[uid]
		_, warm := p.warm[uid]
		if stillThere {
			p.conns[uid] = f
		}
		p.mu.Unlock()
		if !stillThere { // forgotten while dialling
			_ = conn.Close()
			return nil, fmt.Errorf("port-forward to pod %s/%s: the pod is gone", ref.namespace, ref.name)
		}
		if p.idleTimeout > 0 && !warm { // a warm one's is set by Unwarm
			conn.SetIdleTimeout(p.idleTimeout)
		}
		p.metrics.portForwardOpened()
		go func() {
			<-conn.CloseChan()
			p.drop(uid, f)
			p.metrics.portForwardClosed()
			p.rewarm(uid)
		}()
		return f, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*forward), nil
	}
}

// drop forgets f as uid's connection (if it still is) and closes it.
func (p *PortForward) drop(uid types.UID, f *forward) {
	p.mu.Lock()
	if p.conns[uid] == f {
		delete(p.conns, uid)
	}
	p.mu.Unlock()
	_ = f.conn.Close()
}

// open starts a TCP connection to addr's port as the port-forward protocol
// does: an error stream and a data stream with the same request ID.
func (f *forward) open(addr pfAddr) (net.Conn, error) {
	_, p, _ := strings.Cut(string(addr), ":")
	port, _ := strconv.Atoi(p)
	data, errStream, err := pfstream.Open(f.conn, port, f.nextID.Add(1))
	if err != nil {
		return nil, err
	}
	c := &streamConn{conn: f.conn, data: data, errs: errStream, addr: addr, errsDone: make(chan struct{})}
	go c.watchErrors()
	return c, nil
}

// streamConn is a net.Conn over a port-forward data stream. Deadlines are
// not supported (they are accepted and ignored): the HTTP transport ends a
// request by closing its connection, which resets the stream.
type streamConn struct {
	conn       streamhttp.Connection
	data, errs streamhttp.Stream
	addr       pfAddr
	once       sync.Once
	remote     atomic.Pointer[error]
	errsDone   chan struct{} // closed once the error stream has ended
}

// remoteErrorWait is how long a read that failed waits for the error
// stream to say why (the kubelet ends both streams together).
const remoteErrorWait = 500 * time.Millisecond

// watchErrors reads the error stream: a message there (the pod refused
// the port, say) ends the connection with that error.
func (c *streamConn) watchErrors() {
	defer close(c.errsDone)
	msg, err := io.ReadAll(c.errs)
	if err == nil && len(msg) > 0 {
		e := fmt.Errorf("port-forward to %s: %s", c.addr, msg)
		c.remote.Store(&e)
		_ = c.data.Reset()
	}
}

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	return n, c.why(err)
}

func (c *streamConn) Write(b []byte) (int, error) {
	n, err := c.data.Write(b)
	return n, c.why(err)
}

// why replaces a stream error by the error stream's message, if it has one.
func (c *streamConn) why(err error) error {
	if err == nil {
		return nil
	}
	select {
	case <-c.errsDone:
	case <-time.After(remoteErrorWait):
	}
	if e := c.remote.Load(); e != nil {
		return *e
	}
	return err
}

func (c *streamConn) Close() error {
	c.once.Do(func() {
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.errs, c.data)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr              { return c.addr }
func (c *streamConn) RemoteAddr() net.Addr             { return c.addr }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// pfAddr is a port-forward endpoint: namespace/pod:port.
type pfAddr string

func (a pfAddr) Network() string { return "portforward" }
func (a pfAddr) String() string  { return string(a) }

// errNoForward is returned for an address that names no port-forward.
var errNoForward = errors.New("port-forward: not a port-forward address")
