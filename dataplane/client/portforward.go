package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/pfstream"
)

// portForwardProtocol is the port-forward subprotocol kubelets speak.
const portForwardProtocol = "portforward.k8s.io"

// portForward reaches one port of one Pod through the API server's
// pods/portforward: one SPDY connection, dialed on first use and again
// after it drops, carrying a pair of streams (error, data) per TCP
// connection the HTTP client asks for. Nothing listens locally, so no other
// process on the machine can use the tunnel.
type portForward struct {
	cfg  *rest.Config
	url  *url.URL
	pod  string // namespace/name, for errors
	port int
	// core, namespace and name find the Pod to follow (see follow).
	core            *rest.RESTClient
	namespace, name string
	// owner, when set, is the UID of the Sandbox whose Pod this is: a Pod
	// of the name that it does not control is never reached (see verify).
	owner types.UID
	tr    *http.Transport

	mu     sync.Mutex
	conn   httpstream.Connection
	nextID int
	closed bool
	// stopFollowing ends follow; nil until the first connection.
	stopFollowing context.CancelFunc
}

func newPortForward(cfg *rest.Config, core *rest.RESTClient, namespace, pod string, owner types.UID, port int) (*portForward, error) {
	if cfg == nil || core == nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: no Kubernetes client (use New)", namespace, pod)
	}
	u := core.Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("portforward").URL()
	p := &portForward{cfg: cfg, url: u, pod: namespace + "/" + pod, port: port, core: core, namespace: namespace, name: pod, owner: owner}
	// An idle HTTP connection is a pair of streams; the transport's read
	// loop sees them end when the SPDY connection drops, and dials anew.
	p.tr = &http.Transport{DialContext: p.dial, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second}
	return p, nil
}

func (p *portForward) transport() http.RoundTripper { return p.tr }

// Close ends the SPDY connection and every stream on it.
func (p *portForward) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.stopFollowing != nil {
		p.stopFollowing()
	}
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}

// connection returns the SPDY connection, dialing it if there is none or
// the last one closed.
func (p *portForward) connection(ctx context.Context) (httpstream.Connection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, permanent{ErrClosed}
	}
	if p.conn != nil {
		select {
		case <-p.conn.CloseChan():
			p.conn = nil
		default:
			return p.conn, nil
		}
	}
	// The Pod is read while the connection is being made: nothing is sent
	// over it before both are done.
	verified := make(chan error, 1)
	go func() { verified <- p.verify(ctx) }()
	conn, err := p.upgrade(ctx)
	verr := <-verified
	if err != nil {
		return nil, err
	}
	if verr != nil {
		_ = conn.Close()
		return nil, verr
	}
	p.conn = conn
	if p.stopFollowing == nil {
		fctx, cancel := context.WithCancel(context.Background())
		p.stopFollowing = cancel
		go p.follow(fctx)
	}
	return conn, nil
}

// verify checks, while a connection is made and before anything is sent
// over it, that the Pod of the name is the Sandbox's (its controller a Sandbox, by API group and kind, of the owner UID): a Pod that is missing, or
// that another Sandbox of the same name made, is gone to this handle
// (podGone: the caller looks at its Sandbox, by UID).
func (p *portForward) verify(ctx context.Context) error {
	if p.owner == "" {
		return nil
	}
	pod := &corev1.Pod{}
	err := p.core.Get().Namespace(p.namespace).Resource("pods").Name(p.name).Do(ctx).Into(pod)
	switch {
	case apierrors.IsNotFound(err):
		return permanent{podGone{fmt.Errorf("port-forward to pod %s: %w", p.pod, ErrNotFound)}}
	case err != nil:
		return fmt.Errorf("port-forward to pod %s: reading the pod: %w", p.pod, err)
	}
	if ref := sandboxv1beta1.ControllerOf(pod, sandboxv1beta1.SandboxKind); ref == nil || ref.UID != p.owner {
		return permanent{podGone{fmt.Errorf("port-forward to pod %s: the pod is not the sandbox's (UID %s): %w", p.pod, p.owner, ErrNotFound)}}
	}
	return nil
}

// upgrade asks the API server for a port-forward connection. A refusal
// (no such Pod, no node, forbidden) is permanent; 5xx and 429 are not.
func (p *portForward) upgrade(ctx context.Context) (httpstream.Connection, error) {
	// What client-go's spdy.RoundTripperFor does: the config's TLS, proxy
	// and authentication around a SPDY upgrading round tripper (one per
	// connection: it keeps the connection it dialed).
	tlsConfig, err := rest.TLSConfigFor(p.cfg)
	if err != nil {
		return nil, permanent{err}
	}
	proxy := http.ProxyFromEnvironment
	if p.cfg.Proxy != nil {
		proxy = p.cfg.Proxy
	}
	upgrader, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: tlsConfig, Proxier: proxy, PingPeriod: 5 * time.Second})
	if err != nil {
		return nil, permanent{err}
	}
	rt, err := rest.HTTPWrappersForConfig(p.cfg, upgrader)
	if err != nil {
		return nil, permanent{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url.String(), nil)
	if err != nil {
		return nil, permanent{err}
	}
	req.Header.Add(httpstream.HeaderProtocolVersion, portForwardProtocol)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s: %w", p.pod, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		err := fmt.Errorf("port-forward to pod %s: the API server answered %d: %s", p.pod, resp.StatusCode, errorDetail(body))
		if resp.StatusCode == http.StatusNotFound {
			return nil, permanent{podGone{err}}
		}
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return nil, permanent{err}
		}
		return nil, err
	}
	conn, err := upgrader.NewConnection(resp)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s: %w", p.pod, err)
	}
	if got := resp.Header.Get(httpstream.HeaderProtocolVersion); got != portForwardProtocol {
		_ = conn.Close()
		return nil, permanent{fmt.Errorf("port-forward to pod %s: the server speaks %q, not %q", p.pod, got, portForwardProtocol)}
	}
	return conn, nil
}

// drop forgets a connection that failed, so the next dial makes a new one.
func (p *portForward) drop(conn httpstream.Connection) {
	p.mu.Lock()
	if p.conn == conn {
		p.conn = nil
	}
	p.mu.Unlock()
	_ = conn.Close()
}

// dial opens one forwarded TCP connection to the Pod's port.
func (p *portForward) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	return p.dialPort(ctx, p.port)
}

// dialPort opens one forwarded TCP connection to another port of the same
// Pod, over the same SPDY connection (sandboxd's gRPC port next to its REST
// port).
func (p *portForward) dialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	id := p.nextID
	p.nextID++
	p.mu.Unlock()
	data, errStream, err := pfstream.Open(conn, port, int64(id))
	if err != nil {
		p.drop(conn)
		return nil, fmt.Errorf("port-forward to pod %s: %w", p.pod, err)
	}
	sc := &streamConn{Stream: data, errStream: errStream, conn: conn, errDone: make(chan struct{})}
	go sc.readErrors(p, port)
	return sc, nil
}

// streamConn is a net.Conn over a port-forward data stream. What the
// kubelet reports on the paired error stream (e.g. nothing listens on the
// port) becomes the error of Read and Write.
type streamConn struct {
	httpstream.Stream
	errStream httpstream.Stream
	conn      httpstream.Connection
	errDone   chan struct{}
	remoteErr error
	once      sync.Once
}

func (c *streamConn) readErrors(p *portForward, port int) {
	defer close(c.errDone)
	msg, err := io.ReadAll(c.errStream)
	if err == nil && len(msg) > 0 {
		c.remoteErr = fmt.Errorf("port-forward to pod %s port %d: %s", p.pod, port, msg)
		// As kubectl does: a connection that reported an error is not reused.
		p.drop(c.conn)
	}
}

// remote waits briefly for the error stream to say why the data stream
// ended.
func (c *streamConn) remote(err error) error {
	select {
	case <-c.errDone:
	case <-time.After(250 * time.Millisecond):
		return err
	}
	if c.remoteErr != nil {
		return c.remoteErr
	}
	return err
}

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.Stream.Read(b)
	if err != nil {
		err = c.remote(err)
	}
	return n, err
}

func (c *streamConn) Write(b []byte) (int, error) {
	n, err := c.Stream.Write(b)
	if err != nil {
		err = c.remote(err)
	}
	return n, err
}

func (c *streamConn) Close() error {
	c.once.Do(func() {
		_ = c.Reset()
		_ = c.errStream.Reset()
		c.conn.RemoveStreams(c.Stream, c.errStream)
	})
	return nil
}

type pfAddr struct{}

func (pfAddr) Network() string { return "portforward" }
func (pfAddr) String() string  { return "portforward" }

func (c *streamConn) LocalAddr() net.Addr              { return pfAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return pfAddr{} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
