// Package router runs the sandbox router (dataplane/router) against a real
// API server (envtest): its cache resolves Sandboxes and Pods created here,
// as the identity and RBAC of config/router, and requests really go
// through to a server on 127.0.0.1 that the Pods' IPs point at. The
// TokenReview and SubjectAccessReview path runs against the API server's
// own ServiceAccount tokens and RBAC (create sandboxes/exec, the shipped
// agent-sandbox-exec role, refusal caching and the review budget, counted
// on the wire), and config/router's ValidatingAdmissionPolicy is enforced
// by the API server on the router's own writes. Resume on connect and activity
// reports make their real writes (server-side apply, UID preconditions,
// events) with the same identity; the test plays the controller and the
// kubelet (it makes the resumed Sandbox's Pod Ready). Port-forwarding
// needs a kubelet, which envtest has not; the unit tests cover it against
// a fake one.
package router
