package serving

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Timeouts bound how long a client may hold a connection of a server
// (http.Server's fields of the same names) and how large its headers may be.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// Timeouts of each server. The API server gives up on a webhook after at
// most 30 seconds; a pprof profile runs 30 seconds by default and is refused
// when it would outlast the write timeout.
var (
	WebhookTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 35 * time.Second, Idle: 90 * time.Second, MaxHeaderBytes: 64 << 10}
	MetricsTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 15 * time.Second, Write: time.Minute, Idle: 90 * time.Second, MaxHeaderBytes: 64 << 10}
	ProbeTimeouts   = Timeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 15 * time.Second, Idle: 30 * time.Second, MaxHeaderBytes: 16 << 10}
	PprofTimeouts   = Timeouts{ReadHeader: 10 * time.Second, Read: 15 * time.Second, Write: 2 * time.Minute, Idle: 90 * time.Second, MaxHeaderBytes: 16 << 10}
)

// shutdownTimeout bounds a graceful shutdown of any server.
var shutdownTimeout = 30 * time.Second

// HTTPServer returns an http.Server for h with t.
func HTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
	}
}

// Listen listens on addr; "" and "0" mean the server is off (nil, nil).
func Listen(addr string) (net.Listener, error) {
	if addr == "" || addr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return l, nil
}

// New returns a manager runnable serving h on l with t, over TLS when
// tlsConfig is set. It is started with the manager's other HTTP servers,
// before the caches, and stopped after everything else.
func New(name string, l net.Listener, h http.Handler, tlsConfig *tls.Config, t Timeouts) *manager.Server {
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	return &manager.Server{Name: name, Server: HTTPServer(h, t), Listener: l, ShutdownTimeout: &shutdownTimeout}
}

// TLSConfig returns a TLS configuration serving getCertificate's
// certificate (read at every handshake, so a new one is served without a
// restart), TLS 1.2 at least.
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: getCertificate,
	}
}

// Probes holds the liveness and readiness checks and serves them on
// /healthz and /readyz (and /healthz/<check>, /readyz/<check>). Checks are
// added before the server starts.
type Probes struct {
	healthz, readyz healthz.Handler
}

// AddHealthzCheck adds a liveness check.
func (p *Probes) AddHealthzCheck(name string, check healthz.Checker) error {
	return add(&p.healthz, name, check)
}

// AddReadyzCheck adds a readiness check.
func (p *Probes) AddReadyzCheck(name string, check healthz.Checker) error {
	return add(&p.readyz, name, check)
}

func add(h *healthz.Handler, name string, check healthz.Checker) error {
	if h.Checks == nil {
		h.Checks = map[string]healthz.Checker{}
	}
	if _, ok := h.Checks[name]; ok {
		return fmt.Errorf("probe check %q added twice", name)
	}
	h.Checks[name] = check
	return nil
}

// Handler serves the probes.
func (p *Probes) Handler() http.Handler {
	mux := http.NewServeMux()
	for path, h := range map[string]*healthz.Handler{"/healthz": &p.healthz, "/readyz": &p.readyz} {
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h))
	}
	return mux
}

// Pprof serves Go's profiles under /debug/pprof/.
func Pprof() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
