// Package client is the Go SDK for agent sandboxes: claim one from a warm
// pool, run commands and move files in it, throw it away.
//
//	c, err := client.New(restConfig)                       // e.g. from clientcmd
//	sb, err := c.Create(ctx, "default", "python-pool")     // a SandboxClaim, Ready
//	defer sb.Close(ctx)                                    // deletes the claim
//	res, err := sb.Run(ctx, "echo hi")                     // res.Stdout == "hi\n"
//
// It matches upstream's Go SDK (kubernetes-sigs/agent-sandbox,
// clients/go/sandbox) on the wire, so it works with upstream's runtime and
// router as with ours:
//
//   - Create makes a SandboxClaim (generateName "sandbox-claim-",
//     spec.warmPoolRef, the agents.x-k8s.io/client-first-requested-at
//     annotation), waits with one watch for status.sandbox.name and with one
//     more for the Sandbox's Ready=True, connects, and deletes the claim if
//     any of that fails. Open does the same for an existing claim or
//     Sandbox without creating anything. A claim's Sandbox is used only if
//     the claim controls it (API group, kind, name and UID): the name in
//     the claim's status alone could be a later Sandbox's.
//   - Requests speak upstream's legacy runtime protocol (port 8888): POST
//     /execute, POST /upload (multipart, field "file", a path under the base),
//     GET /download/{path}, /list/{path} and /exists/{path} with the path
//     percent-encoded, "/" included.
//   - With WithSandboxd they speak sandboxd instead, upstream's standard
//     runtime API (KEP 539.2), straight to the Pod as upstream's SDKs do in
//     that mode: files through REST on port 8080 (PUT, GET and HEAD
//     /v1/files/{path}), Run through the gRPC ProcessService on port 9090
//     (Execute, with the command split as the legacy runtime splits it), and
//     Sandbox.ProcessService for Start, stdin, signals and PTYs. Both ports
//     share one port-forward connection.
//   - They reach the runtime straight through the API server's port-forward
//     to the sandbox's Pod (the default; needs pods/portforward create), or
//     through a router (WithRouter: X-Sandbox-ID, X-Sandbox-Namespace,
//     X-Sandbox-Port, X-Request-ID, and Authorization with
//     WithBearerToken), or to a base URL (WithBaseURL).
//   - A handle is pinned to the Sandbox it resolved (its UID): through a
//     router every request carries X-Sandbox-UID (the router answers 404
//     once the name stands for another Sandbox); over a port-forward
//     (sandboxd's REST and gRPC connections included) a Pod of the name
//     that the Sandbox does not control is never reached. A
//     handle whose Sandbox is gone gets ErrNotFound, never a namesake.
//   - Read, List, Exists and the health check are retried, up to 6 times
//     with backoff, on connection errors and 500, 502, 503 and 504; Run and
//     Write are sent exactly once, since running a command twice is not the
//     same as running it once.
//   - Resume on connect: a Sandbox that opted in (the annotations
//     agents.x-k8s.io/resume-on-connect or idle-timeout) and is Suspended is
//     set Running by Open, or by a call that finds its Pod gone (the call
//     never reached the runtime and is sent again once it answers); one
//     that did not opt in fails with ErrSuspended. Through a router, the
//     router does this. Without one, the SDK reports the Sandbox's traffic
//     (the last-activity annotation, at most once per interval) for idle
//     suspend. Both writes are server-side apply with the caller's rights.
//   - Every call takes a context; errors can be tested with errors.Is
//     (ErrNotFound, ErrAccessDenied, ErrTooLarge, ErrTimeout, ErrDeleted,
//     ErrSuspended)
//     and errors.As (*HTTPError, with the status code and the server's
//     detail).
//   - Tracing (OpenTelemetry, with the program's global tracer provider; a
//     no-op unless the program set one up): Create is a
//     sandbox.create_claim span and writes upstream's trace-context
//     annotation (opentelemetry.io/trace-context) on the claim, each call
//     to the runtime is a sandbox.<op> client span, and requests carry
//     traceparent (see docs/tracing.md). It does not import
//     dataplane/tracing, so programs that do not trace link no exporter.
//
// This package talks to the API server only through client-go with the
// types of api/; it must never import the controller (apply/), the router
// or the runtime servers (dataplane/runtime, dataplane/sandboxd): programs
// outside the cluster link it. Of the runtime's side it uses only the
// protocol: sandboxd's generated gRPC types (dataplane/sandboxd/processpb)
// and the command-line splitter (dataplane/shlex).
package client
