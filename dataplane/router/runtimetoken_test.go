package router

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestRuntimeToken: the router sends the configured runtime token to the
// sandbox in X-Sandbox-Runtime-Token on plain requests and WebSocket
// handshakes alike, and never passes on one a client sent (configured or
// not): a client cannot forge the router's word.
func TestRuntimeToken(t *testing.T) {
	seen := make(chan string, 1)
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, present := r.Header[http.CanonicalHeaderKey(HeaderRuntimeToken)]
		if !present {
			seen <- "<absent>"
		} else {
			seen <- fmt.Sprint(v)
		}
		if r.Header.Get("Upgrade") == "" {
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
	}))
	forged := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": port, HeaderRuntimeToken: "forged-by-client"}

	for _, tc := range []struct {
		name, configured, want string
	}{
		{"configured", "s3cret-from-file", "[s3cret-from-file]"},
		{"not configured", "", "<absent>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, func(o *Options) { o.RuntimeToken = tc.configured })
			if resp, body := do(t, r, http.MethodPost, "/execute", forged, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if got := <-seen; got != tc.want {
				t.Errorf("HTTP: the sandbox saw %s %s, want %s", HeaderRuntimeToken, got, tc.want)
			}
			// The WebSocket handshake goes the same way.
			conn, err := net.Dial("tcp", r.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: router\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+
				"X-Sandbox-ID: box\r\nX-Sandbox-Port: %s\r\n%s: forged-by-client\r\n\r\n", port, HeaderRuntimeToken)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("handshake: %v %v", resp, err)
			}
			if got := <-seen; got != tc.want {
				t.Errorf("WebSocket: the sandbox saw %s %s, want %s", HeaderRuntimeToken, got, tc.want)
			}
		})
	}
}
