package router

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// wsAccept is the Sec-WebSocket-Accept for a key (RFC 6455).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// writeFrame writes a short text frame, masked as clients must.
func writeFrame(w io.Writer, payload string, masked bool) error {
	b := []byte{0x81, byte(len(payload))}
	p := []byte(payload)
	if masked {
		mask := []byte{1, 2, 3, 4}
		b[1] |= 0x80
		b = append(b, mask...)
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	_, err := w.Write(append(b, p...))
	return err
}

// readFrame reads a short frame and unmasks it.
func readFrame(r io.Reader) (string, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", err
	}
	n := int(h[1] & 0x7f)
	if n >= 126 {
		return "", errors.New("long frames are not needed here")
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return "", err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return "", err
	}
	if h[1]&0x80 != 0 {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return string(p), nil
}

// wsEcho is a WebSocket server that echoes text frames, prefixed, until
// the client goes away; it checks the handshake the router passed on.
func wsEcho(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || r.Header.Get("Authorization") != "" {
			http.Error(w, "not a clean websocket handshake", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			wsAccept(r.Header.Get("Sec-WebSocket-Key")))
		_ = rw.Flush()
		for {
			msg, err := readFrame(rw)
			if err != nil {
				return
			}
			if err := writeFrame(rw, "echo: "+msg, false); err != nil {
				return
			}
			_ = rw.Flush()
		}
	})
}

// TestWebSocket upgrades through the router and talks both ways, after the
// request's timeout has passed (it bounds only the handshake).
func TestWebSocket(t *testing.T) {
	port := backendPort(t, wsEcho(t))
	r := newTestRouter(t, nil)
	conn, err := net.Dial("tcp", r.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	_, _ = fmt.Fprintf(conn, "GET /kernels/1/channels HTTP/1.1\r\nHost: router\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer secret\r\n"+
		"X-Sandbox-ID: box\r\nX-Sandbox-Port: %s\r\nX-Sandbox-Timeout: 0.3\r\n\r\n", key, port)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("handshake: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	time.Sleep(600 * time.Millisecond) // past X-Sandbox-Timeout
	for _, msg := range []string{"hello", "again"} {
		if err := writeFrame(conn, msg, true); err != nil {
			t.Fatal(err)
		}
		got, err := readFrame(br)
		if err != nil || got != "echo: "+msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
	if n := testutil.ToFloat64(r.metrics.inflight); n != 1 {
		t.Errorf("in-flight requests during the session: %v, want 1", n)
	}
	_ = conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(r.metrics.requests.WithLabelValues("1xx")) != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if testutil.ToFloat64(r.metrics.requests.WithLabelValues("1xx")) != 1 || testutil.ToFloat64(r.metrics.connections) != 0 {
		t.Errorf("after the session: 1xx requests %v (want 1), open connections %v (want 0)",
			testutil.ToFloat64(r.metrics.requests.WithLabelValues("1xx")), testutil.ToFloat64(r.metrics.connections))
	}
}

// TestWebSocketLifetime ends a session at --websocket-max-lifetime.
func TestWebSocketLifetime(t *testing.T) {
	port := backendPort(t, wsEcho(t))
	r := newTestRouter(t, func(o *Options) { o.WebSocketMaxLifetime = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", r.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: router\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: x3JJHMbDL1EzLkh9GBhXDw==\r\nSec-WebSocket-Version: 13\r\nX-Sandbox-ID: box\r\nX-Sandbox-Port: %s\r\n\r\n", port)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("the session was not ended at its lifetime: %v after %s", err, time.Since(start))
	}
}
