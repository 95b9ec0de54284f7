package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/agentsandbox/reconciler/webhooks"
)

// Webhook is the admission and conversion webhook server: controller-
// runtime's webhook.Server (registered handlers get its request metrics),
// served with our timeouts, request body caps per path, a budget for the
// bytes of bodies handled at once, and a certificate read at every
// handshake.
type Webhook struct {
	*webhook.DefaultServer

	listener net.Listener
	tls      *tls.Config
	limits   map[string]int64
	budget   *webhooks.BodyBudget
	started  atomic.Bool
}

// WebhookBodyBudget is the most request body bytes the webhook server
// handles at once: a few of the largest conversions, thousands of usual
// admissions.
const WebhookBodyBudget int64 = 96 << 20

var _ webhook.Server = (*Webhook)(nil)

// NewWebhook returns a webhook server on l (plain TCP; TLS is added here)
// serving getCertificate's certificate. Bodies are capped at
// webhooks.MaxAdmissionBodyBytes, except on the paths of limits.
func NewWebhook(l net.Listener, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error), limits map[string]int64) *Webhook {
	return &Webhook{
		DefaultServer: &webhook.DefaultServer{Options: webhook.Options{WebhookMux: http.NewServeMux()}},
		listener:      l,
		tls:           TLSConfig(getCertificate),
		limits:        limits,
		budget:        webhooks.NewBodyBudget(WebhookBodyBudget),
	}
}

// Handler is what the server serves: the registered webhooks behind the
// body caps.
func (s *Webhook) Handler() http.Handler {
	mux := s.Options.WebhookMux
	capped := map[string]http.Handler{}
	for path, limit := range s.limits {
		capped[path] = webhooks.LimitBody(limit, s.budget, mux)
	}
	other := webhooks.LimitBody(webhooks.MaxAdmissionBodyBytes, s.budget, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := capped[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		other.ServeHTTP(w, r)
	})
}

// Start serves until ctx ends.
func (s *Webhook) Start(ctx context.Context) error {
	srv := New("webhook", s.listener, s.Handler(), s.tls, WebhookTimeouts)
	s.started.Store(true)
	return srv.Start(ctx)
}

// StartedChecker is healthy once the server completes TLS handshakes.
func (s *Webhook) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server not started yet")
		}
		// Only checks that TLS is served: the certificate is not verified.
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", s.listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return fmt.Errorf("webhook server not reachable: %w", err)
		}
		return conn.Close()
	}
}

// Addr is where the server listens.
func (s *Webhook) Addr() net.Addr { return s.listener.Addr() }
