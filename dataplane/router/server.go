package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// ServerOptions bound the proxy port's client connections.
type ServerOptions struct {
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (default 90s).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
	// ShutdownTimeout bounds the wait for open requests and WebSocket
	// sessions when the server stops (default 30s).
	ShutdownTimeout time.Duration
	// AllowedHosts, when set, puts the proxy behind LocalGuard: for a
	// router listening on a developer's machine.
	AllowedHosts *webguard.Hosts
	// Front, if set, is served instead of the Handler (which it calls for
	// the requests it passes on): a front door such as the E2B API's. The
	// Handler's requests are still waited for on shutdown.
	Front http.Handler
}

func (o *ServerOptions) defaults() {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
}

// Serve serves h on l until ctx ends, then stops gracefully: no new
// connections, and open requests and WebSocket sessions get up to
// ShutdownTimeout to finish. There are no whole-request read or write
// timeouts on the server (responses stream, sessions last); each request
// is bounded by its own timeout instead (see Handler).
func Serve(ctx context.Context, l net.Listener, h *Handler, o ServerOptions) error {
	o.defaults()
	var handler http.Handler = h
	if o.Front != nil {
		handler = o.Front
	}
	if o.AllowedHosts != nil {
		handler = LocalGuard(handler, o.AllowedHosts, h.o.Metrics)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ConnState:         h.o.Metrics.ConnState,
		ErrorLog:          h.errLog,
	}
	return serve(ctx, srv, l, o.ShutdownTimeout, h.Drain)
}

// AdminHandler serves /metrics from g, /healthz (always ok) and /readyz
// (ready's verdict: the cache has synced).
func AdminHandler(g prometheus.Gatherer, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "detail": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// ServeAdmin serves an AdminHandler on l until ctx ends, with whole-request
// timeouts (its answers are small).
func ServeAdmin(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	return serve(ctx, srv, l, 5*time.Second, nil)
}

func serve(ctx context.Context, srv *http.Server, l net.Listener, timeout time.Duration, drain func(context.Context) error) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if drain != nil { // hijacked connections are not waited for by Shutdown
		err = errors.Join(err, drain(sctx))
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("stopping the server on %s: %w", l.Addr(), err)
	}
	return nil
}
