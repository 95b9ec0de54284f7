package serving

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/agentsandbox/reconciler/webhooks"
)

var short = Timeouts{ReadHeader: 300 * time.Millisecond, Read: 500 * time.Millisecond, Write: time.Second, Idle: time.Second, MaxHeaderBytes: 4 << 10}

// start runs a server until the test ends.
func start(t *testing.T, r manager.Runnable) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// closedWithin says the server closed conn within d (reading returns an
// error other than a timeout of our own deadline).
func closedWithin(conn net.Conn, d time.Duration) error {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := conn.Read(buf)
		if err == nil {
			continue // a 408 or similar before the close is fine
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return errors.New("the connection is still open")
		}
		return nil
	}
}

func selfSigned(t *testing.T) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	t.Helper()
	c, k, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{{127, 0, 0, 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
}

// TestSlowClientsAreCut: a client that sends its request headers slowly,
// or never finishes a TLS handshake, or keeps an idle connection, is
// disconnected after the server's timeouts.
func TestSlowClientsAreCut(t *testing.T) {
	plain := listen(t)
	start(t, New("plain", plain, http.NotFoundHandler(), nil, short))
	saved := WebhookTimeouts
	WebhookTimeouts = short
	t.Cleanup(func() { WebhookTimeouts = saved })
	wh := NewWebhook(listen(t), selfSigned(t), nil)
	start(t, wh)

	for _, tc := range []struct {
		name string
		addr string
		send func(net.Conn) error
	}{
		{"headers never finished", plain.Addr().String(), func(c net.Conn) error {
			_, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n")
			return err
		}},
		{"headers dribbled", plain.Addr().String(), func(c net.Conn) error {
			for range 3 {
				if _, err := io.WriteString(c, "X-Slow: 1\r\n"); err != nil {
					return nil // already cut
				}
				time.Sleep(150 * time.Millisecond)
			}
			return nil
		}},
		{"idle keep-alive", plain.Addr().String(), func(c net.Conn) error {
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		}},
		{"TLS handshake never started", wh.Addr().String(), func(net.Conn) error { return nil }},
		{"TLS request headers never finished", wh.Addr().String(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			if tc.send == nil { // over TLS
				tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(tc, "POST /convert HTTP/1.1\r\nHost: x\r\n"); err != nil {
					t.Fatal(err)
				}
				conn = tc
			} else if err := tc.send(conn); err != nil {
				t.Fatal(err)
			}
			if err := closedWithin(conn, 3*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestWebhookRefusesOversizeBodies: the webhook server answers 413 to a
// body declared over its path's cap without waiting for the body.
func TestWebhookRefusesOversizeBodies(t *testing.T) {
	wh := NewWebhook(listen(t), selfSigned(t), map[string]int64{webhooks.ConvertPath: webhooks.MaxConversionBodyBytes})
	reached := make(chan string, 10)
	for _, p := range []string{webhooks.ConvertPath, webhooks.ValidatePath} {
		wh.Register(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached <- r.URL.Path }))
	}
	start(t, wh)
	for _, tc := range []struct {
		path   string
		length int64
	}{
		{webhooks.ValidatePath, webhooks.MaxAdmissionBodyBytes + 1},
		{webhooks.ConvertPath, webhooks.MaxConversionBodyBytes + 1},
		{"/anything-else", webhooks.MaxAdmissionBodyBytes + 1},
	} {
		t.Run(tc.path, func(t *testing.T) {
			conn, err := tls.Dial("tcp", wh.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			req := "POST " + tc.path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.FormatInt(tc.length, 10) + "\r\n\r\n{"
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "over the limit") {
				t.Errorf("status %d %q, want 413 saying the body is over the limit", resp.StatusCode, body)
			}
		})
	}
	select {
	case p := <-reached:
		t.Errorf("the handler of %s was called with an oversize body", p)
	default:
	}
}
