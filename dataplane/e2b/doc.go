// Package e2b is the sandbox router's E2B front door: the unmodified E2B
// SDK (E2B_API_URL and E2B_SANDBOX_URL both set to the router) creates,
// lists, pauses, resumes and kills sandboxes, and talks to the daemon in
// them, through the router's port.
//
// A request with the E2b-Sandbox-Id header is data plane; one without it
// (and without upstream's X-Sandbox-ID) under /sandboxes or /v2/sandboxes
// is control plane; any other is the router's own, answered as without the
// E2B API (Server.Front).
//
// Control plane: an E2B sandbox is a SandboxClaim labelled
// e2b.agents.x-k8s.io/sandbox=true, named e2b-<12 random [a-z0-9]>, in the
// namespace the caller's credential maps to; its ID is
// "<namespace>--<suffix>" (ParseID accepts nothing else), so that the data
// plane finds the claim from the ID alone. create claims the warm pool
// templateID names (or the pool of the SandboxTemplate of that name) and
// answers once the claim is Ready; timeout is the claim's
// lifecycle.shutdownTime (policy Delete); metadata is kept whole in an
// annotation and, entry by entry where valid, as labels (list filters
// on them); envVars become the claim's spec.env (the template's
// envVarsInjectionPolicy decides, and such claims start cold);
// autoResume.enabled lets data-plane requests resume the sandbox. pause
// and connect set the claim's Sandbox's spec.operatingMode (Suspended,
// Running) by server-side apply under the field manager of idle suspend,
// guarded by the Sandbox's UID; kill deletes the claim guarded by its
// UID; setTimeout updates the shutdown time guarded by the resourceVersion.
// Errors are E2B's {"code", "message"}.
//
// Auth: X-API-KEY is a key kept in a labelled Secret of one namespace
// (KeySecrets: its SHA-256, compared in constant time, names a namespace
// and a user), or else a Kubernetes bearer token, reviewed with the
// router's TokenReview (cache and budget included); a ServiceAccount's
// sandboxes live in its own namespace, other users' in DefaultNamespace. Each call
// asks a SubjectAccessReview for its verb on sandboxclaims and, when it
// runs code or hands out the access token, create sandboxes/exec. Without
// Auth any non-empty key is a caller in DefaultNamespace (--e2b-auth=none).
// The envdAccessToken is an HMAC of the claim's namespace, name and UID
// under the router's key (Tokens): nothing is stored, and only the router
// can make one. IDs of another namespace, unknown claims and claims not
// made through this API are all answered 404 alike.
//
// Data plane: the claim (from the router's cache) must match the ID and
// X-Access-Token its token; the request then goes through the router's
// proxy (router.Handler.ServeTarget) to the Pod of the Sandbox the claim
// controls (checked by claim UID), on E2b-Sandbox-Port, streamed
// unbuffered, resuming a paused sandbox that asked for autoResume, with
// X-Access-Token, X-API-KEY and Authorization removed.
//
// It imports the router and the API types, never the controller's
// packages.
package e2b
