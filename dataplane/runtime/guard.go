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

// guard is the runtime's checks, shared by its own handler and by Guard:
// a Host the runtime was not told to accept (Options.AllowedHosts; 403), a
// request from a page of another site (403) and, when the runtime has a
// token, a request without it (401), health checks excepted.
type guard struct {
	opts Options
	// health reports whether a request is a health check (no token needed).
	health func(*http.Request) bool
	// codes answers in sandboxd's {"code", "message"} shape everywhere,
	// not only under /v1/.
	codes bool
}

// refused answers r when it must not be served and reports whether it did.
func (g guard) refused(w http.ResponseWriter, r *http.Request) bool {
	if g.opts.AllowedHosts != nil && !g.opts.AllowedHosts.Allowed(r.Host) {
		g.refuse(w, r, http.StatusForbidden, "PERMISSION_DENIED", "Host "+quoteHost(r.Host)+
			" is not allowed: this runtime answers only requests addressed to this machine (localhost, 127.0.0.1, [::1]) or an IP address")
		return true
	}
	if why := webguard.CrossSite(r); why != "" {
		g.refuse(w, r, http.StatusForbidden, "PERMISSION_DENIED", "Refused "+why+": the runtime does not serve web pages of other sites")
		return true
	}
	if g.opts.AuthToken != "" && !g.health(r) && !TokenMatches(r.Header.Get(TokenHeader), g.opts.AuthToken) {
		g.refuse(w, r, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Missing or wrong "+TokenHeader+": this runtime serves only requests that come through the sandbox router")
		return true
	}
	return false
}

// Guard returns middleware that puts another HTTP API served next to the
// runtime (sandboxd's REST API) behind the runtime's own checks, configured
// by opts' AuthToken, AllowedHosts and Logger: the Host allowlist, the
// cross-site refusal and the token, which every request but GET /v1/health
// must carry. Refusals are sandboxd's {"code", "message"}: 403
// PERMISSION_DENIED, 401 UNAUTHENTICATED.
func Guard(opts Options) func(http.Handler) http.Handler {
	g := guard{opts: opts.withDefaults(), health: isSandboxdHealth, codes: true}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g.refused(w, r) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// GuardWithHealth is Guard for another API whose health check is GET (or
// HEAD) healthPath rather than /v1/health (envd's /health): that path needs
// no token, every other one does. Refusals are the same as Guard's.
func GuardWithHealth(opts Options, healthPath string) func(http.Handler) http.Handler {
	health := func(r *http.Request) bool { return isGet(r) && r.URL.EscapedPath() == healthPath }
	g := guard{opts: opts.withDefaults(), health: health, codes: true}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g.refused(w, r) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TokenMatches reports, in constant time, whether got is the token want
// (for checks of the same token outside HTTP, such as gRPC metadata).
func TokenMatches(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// isHealth reports whether r is a health check, which needs no token:
// GET / (the legacy protocol) and GET /v1/health (sandboxd).
func isHealth(r *http.Request) bool {
	return isGet(r) && (r.URL.EscapedPath() == "/" || r.URL.EscapedPath() == "/v1/health")
}

// isSandboxdHealth is sandboxd's only health check, GET /v1/health.
func isSandboxdHealth(r *http.Request) bool {
	return isGet(r) && r.URL.EscapedPath() == "/v1/health"
}

func isGet(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

// refuse answers a refused request: sandboxd's {"code", "message"} under
// /v1/ (or everywhere, for Guard), the legacy protocol's {"message"}
// elsewhere.
func (g guard) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	g.opts.Logger.Warn("request refused", "status", status, "method", r.Method, "path", r.URL.EscapedPath(),
		"remote", r.RemoteAddr, "reason", msg)
	if g.codes || strings.HasPrefix(r.URL.EscapedPath(), "/v1/") {
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
