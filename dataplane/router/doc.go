// Package router is the sandbox router: an HTTP reverse proxy that sends a
// request to the sandbox its headers name, wire-compatible with upstream
// agent-sandbox's sandbox-router (the X-Sandbox-* headers, {"detail": ...}
// errors, /healthz, streamed responses and WebSockets passed through), so
// upstream SDKs work with it unchanged.
//
// A request names a Sandbox (X-Sandbox-ID, X-Sandbox-Namespace) and a port.
// The router resolves it through a watch cache of Sandboxes (metadata only)
// and of sandbox Pods (those with the sandbox-name-hash label): the
// Sandbox's Pod (annotation agents.x-k8s.io/pod-name, else the Sandbox's
// name) is reached only if the Pod is controlled by that Sandbox and Ready,
// and the Sandbox is standalone or claimed, never an unclaimed warm-pool
// member. Pods are dialled directly at their IP or, where pod IPs are not
// reachable (a kwok cluster), through the API server's pods/portforward
// with one kept-alive connection per Pod. Callers may be authenticated with
// a TokenReview and authorized with a SubjectAccessReview (get on the
// Sandbox). The Authorization header never reaches the sandbox.
//
// The package never writes to the cluster (TokenReviews and
// SubjectAccessReviews aside) and never imports the controller's packages
// (apply/, webhooks/, policy/): it reads the API types and talks to the API
// server through client-go and controller-runtime's cache only.
package router
