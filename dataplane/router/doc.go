// Package router is the sandbox router: an HTTP reverse proxy that sends a
// request to the sandbox its headers name, wire-compatible with upstream's
// sandbox-router (the X-Sandbox-* headers, {"detail": ...} errors, /healthz,
// streamed responses and WebSockets), so upstream's SDKs work unchanged.
//
// Rules:
//   - Callers are authorized before anything else is done for a request
//     (a request that names only its claim, no Sandbox: authenticated
//     first, then authorized on the Sandbox the claim controls, found
//     without routing to it (ClaimFinder), before it is waited for or
//     resumed;
//     TokenReview, then a SubjectAccessReview for create on
//     sandboxes/exec: reading a Sandbox is not running code in it; with the
//     cache on, first about all names of the namespace, whose yes covers
//     each and whose no sends the question on by name; an allowed answer
//     in use is asked again ahead of its TTL's end); reviews have a
//     budget (ReviewBudget), so made-up tokens cannot starve real callers. TrustPortForward trusts only the router Pod's own loopback.
//   - A request reaches a Pod only if the watch cache shows it controlled by
//     the named Sandbox (and the X-Sandbox-UID, when sent; and by the claim
//     X-Sandbox-Claim-UID names, when sent), Ready, and the
//     Sandbox standalone or claimed, never an unclaimed warm member. A
//     request naming only a claim (X-Sandbox-Claim-UID, no X-Sandbox-ID)
//     goes to the one Sandbox of its namespace that claim controls (the
//     cache's claim UID index), waited for while the claim takes one
//     (with RouteByClaim: it trusts controller references, which the
//     ownership webhook guards). A request that asks only where it goes
//     (X-Sandbox-Resolve-Only) is answered 204 with its Sandbox's name and
//     UID, once routed and authorized, and never sent on.
//     Addresses are checked, never trusted: X-Sandbox-Pod-IP must be the
//     Pod's, and the DNS fallback dials the address it checked. A request
//     the cache cannot route yet waits for the cache's next event
//     (Changes), not for a poll.
//   - With the port-forward transport (PortForward), a Ready, unclaimed warm
//     member's Pod may be connected ahead (Prewarm), but nothing is sent to
//     it until a request routed by the rules above. With the kwok transport
//     (KwokForwards, local kwok clusters), a routed Pod's port is dialled at
//     the address its kwok PortForward object gives, checked like a pod IP.
//   - A request whose connection failed before the sandbox got it is sent
//     again (UpstreamRetries); answers the router made without the request
//     reaching the sandbox say so (HeaderNotForwarded).
//   - A proxied answer names the Sandbox routed to (X-Sandbox-UID and
//     X-Sandbox-ID; the sandbox's own values are replaced), and /healthz the checks made beyond
//     upstream's (X-Sandbox-Router-Checks), so that a client relies only on
//     checks its router, not a sandbox, says it makes.
//   - Authorization and a client's X-Sandbox-Runtime-Token never reach the
//     sandbox; a router on a developer's machine runs behind LocalGuard.
//   - Its only writes: spec.operatingMode Running on an opted-in Suspended
//     Sandbox, the last-activity annotation (both server-side apply with a
//     UID precondition), ResumedOnConnect events and the reviews. It never
//     suspends, and never imports apply/, webhooks/ or policy/.
//
// Front doors such as dataplane/e2b hand Handler.ServeTarget a target they
// resolved and authorized. The user's guide is docs/router.md.
package router
