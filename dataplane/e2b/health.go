package e2b

import (
	"context"
	"net/http"
	"net/http/httptest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// healthy reports whether the sandbox's daemon answers GET /health with a
// 2xx through the router's proxy, as the SDK's next request would reach
// it. A Pod can be Ready a moment before the daemon in it listens (the
// local cluster's stand-in starts it then; a Pod without a readiness probe
// anywhere): connect answers only once this holds, so that the SDK's first
// call after it does not meet a 502. Without a proxy (unit tests) it holds.
func (s *Server) healthy(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *sandboxv1beta1.Sandbox) bool {
	if s.o.Proxy == nil {
		return true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return false
	}
	rec := httptest.NewRecorder()
	s.o.Proxy.ServeTarget(rec, req, router.Target{ID: sb.Name, Namespace: sb.Namespace, Port: s.o.EnvdPort,
		ClaimUID: claim.UID, Timeout: pollInterval * 10})
	return rec.Code >= 200 && rec.Code < 300
}
