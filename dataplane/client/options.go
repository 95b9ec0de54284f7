package client

import (
	"net/http"
	"time"
)

// Option configures a Client, or one Create, Open or Dial call.
type Option func(*options)

// How a Sandbox's requests reach its runtime.
type strategy int

const (
	viaPortForward strategy = iota
	viaRouter
	viaBaseURL
	viaSandboxd
)

type options struct {
	strategy     strategy
	url          string // the router's, or the direct base URL (a template)
	token        string
	port         int
	httpClient   *http.Client
	readyTimeout time.Duration
	attempts     int
	backoff      time.Duration
	maxBackoff   time.Duration
	// claimReady: Create waits for the claim's Ready, even through a
	// router that routes by claim (WithClaimReady).
	claimReady bool
	// starting: the sandbox was just resumed, its runtime is starting
	// (connect polls its health quickly; not an Option).
	starting bool
	// seenReady: Create watched its claim's Sandbox become Ready, so
	// through a router connect sends no health request (not an Option).
	seenReady bool
}

func defaultOptions() options {
	return options{
		strategy:     viaPortForward,
		port:         DefaultPort,
		readyTimeout: 3 * time.Minute,
		attempts:     6,
		backoff:      500 * time.Millisecond,
		maxBackoff:   8 * time.Second,
	}
}

// DefaultPort is the port of upstream's legacy runtime protocol.
const DefaultPort = 8888

// WithPortForward reaches the sandbox's Pod straight through the API
// server's port-forward (pods/portforward), with no router and no local
// listening port: each connection is a stream of one SPDY connection per
// Sandbox. The Pod's name is the Sandbox's agents.x-k8s.io/pod-name
// annotation, else the Sandbox's name. This is the default.
func WithPortForward() Option {
	return func(o *options) { o.strategy, o.url = viaPortForward, "" }
}

// Ports of upstream's sandboxd runtime API (KEP 539.2) in a sandbox's Pod.
const (
	// SandboxdRESTPort serves the REST API: /v1/files, /v1/health.
	SandboxdRESTPort = 8080
	// SandboxdGRPCPort serves the gRPC process.v1.ProcessService.
	SandboxdGRPCPort = 9090
)

// WithSandboxd speaks sandboxd, upstream's standard runtime API (KEP
// 539.2; upstream Go SDK's Runtime "sandboxd"), instead of the legacy
// protocol: straight to the sandbox's Pod through the API server's
// port-forward (pods/portforward), files through the REST API on port
// 8080 (/v1/files), commands through the gRPC ProcessService on port 9090
// (Execute for Run; ProcessService for streaming, stdin and PTYs). Both
// ports share one SPDY connection. WithPort does not apply.
func WithSandboxd() Option {
	return func(o *options) { o.strategy, o.url = viaSandboxd, "" }
}

// WithRouter sends every request to a sandbox router (upstream's
// sandbox-router or ours) at baseURL, e.g. http://sandbox-router-svc:8080,
// with the X-Sandbox-ID, X-Sandbox-Namespace and X-Sandbox-Port headers
// that tell it which sandbox to reach.
func WithRouter(baseURL string) Option {
	return func(o *options) { o.strategy, o.url = viaRouter, baseURL }
}

// WithBaseURL sends requests straight to baseURL, with no routing headers.
// {name}, {namespace}, {pod} and {podIP} in it are replaced by the
// Sandbox's, e.g. http://{podIP}:8888 from inside the cluster.
func WithBaseURL(baseURL string) Option {
	return func(o *options) { o.strategy, o.url = viaBaseURL, baseURL }
}

// WithBearerToken sends "Authorization: Bearer token" with every request to
// the router or base URL (a router with TokenReview authentication wants a
// ServiceAccount token). It is never sent through port-forward.
func WithBearerToken(token string) Option {
	return func(o *options) { o.token = token }
}

// WithPort is the runtime's port in the Pod (default 8888), sent as
// X-Sandbox-Port to a router and used by port-forward.
func WithPort(port int) Option {
	return func(o *options) { o.port = port }
}

// WithHTTPClient is the client for the router or base URL (TLS settings,
// proxies, tracing). Its redirects are not followed.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// WithReadyTimeout bounds how long Create and Open wait for the claim to
// be bound, its Sandbox to be Ready and the runtime to answer (default 3
// minutes); the context's deadline applies as well. Zero leaves only the
// context's.
func WithReadyTimeout(d time.Duration) Option {
	return func(o *options) { o.readyTimeout = d }
}

// WithClaimReady makes Create wait, as upstream's SDKs do, for the claim's
// status to say Ready (one watch of the claim) before it returns, even
// through a router that routes by claim, where it would otherwise return
// as soon as the claim controls a routable Sandbox: for a caller that
// reads the claim's status right after Create.
func WithClaimReady() Option {
	return func(o *options) { o.claimReady = true }
}

// WithRetries sets how many times idempotent calls (Read, List, Exists and
// the health check) are tried on connection errors and 500, 502, 503 and
// 504 (default 6), and the first wait between tries (default 500ms,
// doubling up to 8s, with jitter). Run and Write are always sent once.
func WithRetries(attempts int, backoff time.Duration) Option {
	return func(o *options) {
		if attempts > 0 {
			o.attempts = attempts
		}
		if backoff > 0 {
			o.backoff = backoff
			o.maxBackoff = max(o.maxBackoff, backoff)
		}
	}
}
