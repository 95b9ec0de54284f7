// Package e2b is the sandbox router's E2B front door: the unmodified E2B SDK
// (E2B_API_URL and E2B_SANDBOX_URL both set to the router) creates, lists,
// pauses, resumes and kills sandboxes, and talks to the daemon in them,
// through the router's port (Server.Front). An E2B sandbox is a SandboxClaim
// labelled e2b.agents.x-k8s.io/sandbox=true whose ID, "<namespace>--<suffix>"
// (ParseID), names its claim.
//
// Rules:
//   - Every call is authorized as its Kubernetes verb on sandboxclaims in the
//     caller's namespace, plus create sandboxes/exec when it runs code or
//     hands out an access token (Auth, KeySecrets); IDs of another
//     namespace, unknown claims and claims not made through this API are all
//     404 alike.
//   - Access tokens are HMACs of the claim's namespace, name and UID under
//     the router's key (Tokens): nothing is stored, only the router makes one.
//   - Data-plane requests go through router.Handler.ServeTarget to the Pod of
//     the Sandbox the claim controls (checked by the claim's UID), with
//     X-Access-Token, X-API-KEY and Authorization removed.
//   - Writes are guarded: a deleted claim by its UID, pause and connect by the
//     Sandbox's UID, a new timeout by the claim's resourceVersion.
//   - It imports the router and the API types, never the controller's packages.
//
// Errors are E2B's {"code", "message"}. The user's guide is docs/router.md
// (the E2B API) and docs/sdks.md (the SDK).
package e2b
