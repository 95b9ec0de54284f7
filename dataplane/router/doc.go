// Package router is the sandbox router: an HTTP reverse proxy that sends a
// request to the sandbox its headers name, wire-compatible with upstream
// agent-sandbox's sandbox-router (the X-Sandbox-* headers, {"detail": ...}
// errors, /healthz, streamed responses and WebSockets passed through), so
// upstream SDKs work with it unchanged.
//
// A request names a Sandbox (X-Sandbox-ID, X-Sandbox-Namespace) and a port.
// The router resolves it through a watch cache of Sandboxes (trimmed to
// their identity, owners, pod-name and resume annotations, warm-pool label
// and spec.operatingMode) and of sandbox Pods (only those with the
// sandbox-name-hash label are listed and watched): the Sandbox's Pod (annotation
// agents.x-k8s.io/pod-name, else the Sandbox's name) is reached only if the
// Pod is controlled by that Sandbox and Ready, and the Sandbox is Running
// and standalone or claimed, never an unclaimed warm-pool member. Pods are dialled directly at their IP or, where pod IPs are not
// reachable (a kwok cluster), through the API server's pods/portforward
// with one kept-alive connection per Pod. Callers may be authenticated with
// a TokenReview and authorized with a SubjectAccessReview for create on
// sandboxes/exec (as kubectl exec is for pods/exec: reading a Sandbox is
// not running code in it), before anything else is done for the request;
// answers, refusals included, are cached briefly, and reviews have a
// budget (ReviewBudget) so that made-up tokens cannot starve real callers.
// TrustPortForward lets through, without a token, requests that reached
// the router on its own Pod's loopback address, where only the API
// server's pods/portforward connects (upstream's SDKs in their
// port-forward modes send none); the API server authorized that caller for
// pods/portforward already.
// The Authorization header and a client's X-Sandbox-Runtime-Token never
// reach the sandbox; the router sends its own runtime token when
// configured. The DNS fallback resolves names itself, checks every address
// as it checks literal IPs, and dials the checked address.
// A router that listens on a developer's machine runs behind LocalGuard
// (ServerOptions.AllowedHosts): a Host that is not this machine's or an IP
// address (DNS rebinding) and requests from pages of other sites are
// refused 403.
//
// Resume on connect: a request for a Suspended Sandbox that opted in
// (annotation agents.x-k8s.io/resume-on-connect or idle-timeout) sets it
// Running, once for all the requests that wait for it, and is proxied once
// the Sandbox is routable; one that did not opt in is refused 409 with how
// to opt in. Requests to a Sandbox with idle suspend are reported as
// activity, off the request path (dataplane/resume).
//
// A request pinned to a Sandbox UID (X-Sandbox-UID) whose Sandbox is gone,
// even if another Sandbox now has the name, is answered 404, and never
// sent to the DNS fallback.
//
// Its writes to the cluster are exactly these: spec.operatingMode set to
// Running on an opted-in Suspended Sandbox (field manager
// agent-sandbox-operating-mode), the last-activity annotation of Sandboxes
// with idle suspend (agent-sandbox-activity), both server-side apply with
// the Sandbox's UID as a precondition; a ResumedOnConnect event
// (events.k8s.io) per resume; and TokenReviews and SubjectAccessReviews.
// It never writes anything else, never suspends a Sandbox (the controller
// does), and never imports the controller's packages (apply/, webhooks/,
// policy/): it reads the API types and talks to the API server through
// client-go and controller-runtime's cache only.
//
// Front doors: Handler.ServeTarget proxies a request whose target another
// package resolved and authorized (dataplane/e2b, which names the Sandbox
// through its claim: Target.ClaimUID must control it, and
// Target.ResumeOnConnect stands for the opt-in annotation), and
// ServerOptions.Front serves such a front door on the proxy port; the
// cache holds SandboxClaims only when CacheOptions.Claims asks. The E2B
// front door's own writes (claims, pause) are its package's.
//
// Tracing: with Options.Tracer set, every proxied request is a server span
// continuing its traceparent (router.request) and a client span
// (router.proxy) whose context the sandbox receives as traceparent; with it
// nil no span is made and the client's traceparent passes through as sent.
package router
