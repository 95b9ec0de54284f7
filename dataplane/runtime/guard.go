package runtime

import (
	"crypto/subtle"
	"net/http"
	"os"
	"strings"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

const (
	// TokenHeader carries the shared token a runtime started with one
	// (Options.AuthToken) requires: the router sends it when it has one
	// (its --runtime-token-file).
	TokenHeader = "X-Sandbox-Runtime-Token"
	// TokenEnv is the environment variable cmd/sandbox-runtime reads the
	// token from. It never reaches the commands the runtime runs.
	TokenEnv = "SANDBOX_RUNTIME_TOKEN"
)

// guard refuses what must not be served, in the protocol's error shape, and
// reports whether it did: a Host the runtime was not told to accept
// (Options.AllowedHosts; 403), a request from a page of another site (403),
// and, when the runtime has a token, a request without it (401), health
// checks excepted.
func (h *handler) guard(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.AllowedHosts != nil && !h.opts.AllowedHosts.Allowed(r.Host) {
		h.refuse(w, r, http.StatusForbidden, "PERMISSION_DENIED", "Host "+quoteHost(r.Host)+
			" is not allowed: this runtime answers only requests addressed to this machine (localhost, 127.0.0.1, [::1]) or an IP address")
		return true
	}
	if why := webguard.CrossSite(r); why != "" {
		h.refuse(w, r, http.StatusForbidden, "PERMISSION_DENIED", "Refused "+why+": the runtime does not serve web pages of other sites")
		return true
	}
	if h.opts.AuthToken != "" && !isHealth(r) &&
		subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(h.opts.AuthToken)) != 1 {
		h.refuse(w, r, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Missing or wrong "+TokenHeader+": this runtime serves only requests that come through the sandbox router")
		return true
	}
	return false
}

// isHealth reports whether r is a health check, which needs no token:
// GET / (the legacy protocol) and GET /v1/health (sandboxd).
func isHealth(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.EscapedPath()
	return p == "/" || p == "/v1/health"
}

// refuse answers a refused request: sandboxd's {"code", "message"} under
// /v1/, the legacy protocol's {"message"} elsewhere.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	h.opts.Logger.Warn("request refused", "status", status, "method", r.Method, "path", r.URL.EscapedPath(),
		"remote", r.RemoteAddr, "reason", msg)
	if strings.HasPrefix(r.URL.EscapedPath(), "/v1/") {
		writeJSON(w, status, map[string]string{"code": code, "message": msg})
		return
	}
	writeJSON(w, status, message("%s", msg))
}

func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}

// childEnv is the runtime's environment without the token, for the
// commands it runs.
func childEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != TokenEnv {
			out = append(out, kv)
		}
	}
	return out
}
