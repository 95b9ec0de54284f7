package e2b

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/dataplane/router"
)

// The data plane's headers, as the SDK sends them.
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
)

// DefaultEnvdVersion is the envdVersion reported when Options.EnvdVersion
// is empty: the version the sandbox runtime's envd subset answers for
// (dataplane/envd.Version; tests/e2b keeps the two equal). The SDK turns
// features on by it: stdin (0.3.0), no default user (0.4.0), closeStdin
// (0.5.2) and octet-stream uploads (0.5.7), all served there; below 0.5.2
// it refuses closeStdin. --e2b-envd-version overrides it for runtimes
// that serve less.
const DefaultEnvdVersion = "0.5.7"

// ClientID is the clientID every sandbox reports (E2B's cluster node
// name; one router is one "client" here).
const ClientID = "agent-sandbox"

// Options configure a Server.
type Options struct {
	// Client writes and reads SandboxClaims and reads SandboxWarmPools
	// (uncached: control-plane answers are read fresh). Required.
	Client client.Client
	// Cache reads SandboxClaims (trimmed by TrimClaim), Sandboxes and Pods
	// (the router's cache): the data plane and the waits. Required.
	Cache client.Reader
	// Sandboxes reaches agents.x-k8s.io/v1beta1 for the pause and resume
	// writes (resume.NewREST). Required.
	Sandboxes rest.Interface
	// Proxy carries data-plane requests (the router's handler). Required.
	Proxy *router.Handler
	// Auth, if set, reviews X-API-KEY as a Kubernetes bearer token and
	// each call's rights; nil takes any non-empty key as a caller in
	// DefaultNamespace with every right (--e2b-auth=none).
	Auth *router.TokenReview
	// Keys, if set (with Auth), looks X-API-KEY up in Secrets first: a
	// key found there acts as the user, in the namespace, its Secret
	// names (still asked about by SubjectAccessReview).
	Keys *KeySecrets
	// DefaultNamespace is where the sandboxes of a caller that is not a
	// ServiceAccount live (ServiceAccounts use their own namespace).
	DefaultNamespace string
	// Tokens makes and checks envdAccessTokens. Required.
	Tokens *Tokens
	// EnvdVersion is reported as envdVersion; empty: DefaultEnvdVersion.
	EnvdVersion string
	// ReadyTimeout bounds create's and connect's wait for the sandbox,
	// and pause's wait for its Pod to go (default 2m).
	ReadyTimeout time.Duration
	// MaxSandboxTimeout is the longest timeout a sandbox may ask for
	// (default 24h).
	MaxSandboxTimeout time.Duration
	// EnvdPort is the port of the daemon in a sandbox, whose GET /health
	// connect waits for (default DefaultSandboxPort, envd's 49983).
	EnvdPort int
	// ResolveWait is how long a data-plane request for a claim the cache
	// does not show yet waits for it (default 2s).
	ResolveWait time.Duration
	// Changes, if set, tells of every change Cache takes in: a wait for
	// the cache (a claim Ready, a Pod gone) looks again at once rather than
	// at the next poll. Nil: waits poll.
	Changes *router.Changes
	// MaxRequestTimeout caps a data-plane request's Connect-Timeout-Ms
	// (the router's --max-timeout); requests without one get the router's
	// default timeout.
	MaxRequestTimeout time.Duration
	// Log receives failures.
	Log logr.Logger
}

// Server is the E2B front door: the control plane on SandboxClaims and
// the data plane through the router's proxy.
type Server struct {
	o       Options
	control *http.ServeMux
}

// New returns the Server.
func New(o Options) *Server {
	if o.EnvdVersion == "" {
		o.EnvdVersion = DefaultEnvdVersion
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.MaxSandboxTimeout <= 0 {
		o.MaxSandboxTimeout = 24 * time.Hour
	}
	if o.EnvdPort <= 0 {
		o.EnvdPort = DefaultSandboxPort
	}
	if o.ResolveWait <= 0 {
		o.ResolveWait = 2 * time.Second
	}
	s := &Server{o: o, control: http.NewServeMux()}
	m := s.control
	m.HandleFunc("POST /v2/sandboxes", s.create)
	m.HandleFunc("GET /v2/sandboxes", s.list)
	m.HandleFunc("GET /sandboxes", s.list)
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", s.connect)
	m.HandleFunc("POST /sandboxes/{id}/connect", s.connect)
	m.HandleFunc("POST /sandboxes/{id}/resume", s.connect)
	m.HandleFunc("GET /sandboxes/{id}", s.info)
	m.HandleFunc("DELETE /sandboxes/{id}", s.kill)
	m.HandleFunc("POST /sandboxes/{id}/timeout", s.setTimeout)
	m.HandleFunc("POST /sandboxes/{id}/pause", s.pause)
	m.HandleFunc("GET /sandboxes/{id}/metrics", s.metrics)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, errorf(http.StatusNotFound, "%s %s is not part of the E2B API this router serves", r.Method, r.URL.Path))
	})
	return s
}

// Front routes a request on the router's port: one with E2b-Sandbox-Id to
// the data plane; one without it under the E2B API's paths (/sandboxes,
// /v2/sandboxes and below) to the E2B control plane; any other to legacy,
// upstream's router contract, so that a request with X-Sandbox-ID (or,
// routed by claim, X-Sandbox-Claim-UID), /healthz
// and a request missing its headers are answered exactly as without --e2b
// (the last with upstream's 400 "X-Sandbox-ID header is required").
func (s *Server) Front(legacy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get(HeaderSandboxID) != "":
			s.dataPlane(w, r)
		case r.Header.Get(router.HeaderSandboxID) == "" && r.Header.Get(router.HeaderClaimUID) == "" && isControlPath(r.URL.Path):
			// Never reaches a sandbox: the key stays here.
			s.control.ServeHTTP(w, r)
		default:
			legacy.ServeHTTP(w, r)
		}
	})
}

// isControlPath reports whether path is one of the E2B control plane's:
// /sandboxes or /v2/sandboxes, or below either.
func isControlPath(path string) bool {
	for _, p := range []string{"/sandboxes", "/v2/sandboxes"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
