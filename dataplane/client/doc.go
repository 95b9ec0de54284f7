// Package client is the Go SDK for agent sandboxes: claim one from a warm
// pool, run commands and move files in it, throw it away.
//
//	c, err := client.New(restConfig)                       // e.g. from clientcmd
//	sb, err := c.Create(ctx, "default", "python-pool")     // a SandboxClaim, Ready
//	defer sb.Close(ctx)                                    // deletes the claim
//	res, err := sb.Run(ctx, "echo hi")                     // res.Stdout == "hi\n"
//
// With sandboxd, Interactive runs a program with its input, output and a
// terminal relayed as they come (kubectl sandbox exec -it).
//
// Rules:
//   - Upstream's Go SDK is the contract on the wire: the claim it makes, the
//     legacy runtime protocol, sandboxd (WithSandboxd) and the router's
//     headers (WithRouter), so upstream's runtime and router work as ours do.
//   - A handle is pinned to the Sandbox it resolved (API group, kind, name and
//     UID) and reaches only a Pod that Sandbox controls: once it is gone,
//     calls get ErrNotFound, never a namesake. Waiting for a claim or a
//     Sandbox heeds that object only, by UID: another of its name (one being
//     deleted, or another tenant's made first) is never taken for it.
//     Through a router that says on /healthz that it checks claim UIDs
//     (ours), a Ready claim's Sandbox is not read: each request names the
//     claim (HeaderSandboxClaimUID) for the router to check, and the
//     handle pins itself to the Sandbox UID the router's answer names.
//     Through a router that also routes by claim, Create watches nothing:
//     one request names only the new claim and asks only where it goes,
//     waits in the router until the claim controls a Sandbox, and the
//     router's answer names it (the claim's watch is the fallback). A check is relied on only when the
//     router, not a sandbox, says it makes it.
//   - Only idempotent calls are retried (Read, List, Exists, the health
//     check); Run and Write reach the runtime at most once: Run is sent
//     again only when a router answered that it never reached the sandbox
//     (HeaderNotForwarded). Create through a router that does not route by
//     claim sends no health check: it has just seen the Sandbox Ready, and
//     the first call finds the runtime.
//   - Its writes (a claim, resume on connect, activity reports) are made with
//     the caller's rights.
//   - It must never import the controller (apply/), the router or the runtime
//     servers: programs outside the cluster link it. Of the runtime it uses
//     only the protocol (dataplane/sandboxd/processpb, dataplane/shlex), and
//     it traces through the global tracer provider, so programs that do not
//     trace link no exporter.
//
// The user's guide is docs/sdks.md.
package client
