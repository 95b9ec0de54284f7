package router

import (
	"bufio"
	"net"
	"net/http"
)

// recorder remembers the status a response got, and whether its
// connection was hijacked (a WebSocket session), for the metrics. Flushing
// and hijacking go through to the server's ResponseWriter.
type recorder struct {
	http.ResponseWriter
	code     int
	hijacked bool
}

func (r *recorder) WriteHeader(code int) {
	if code >= 200 && r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush sends what was written so far.
func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Hijack hands the connection to the reverse proxy (protocol upgrades).
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.hijacked = true
		r.code = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the server's ResponseWriter.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}
