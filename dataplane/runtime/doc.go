// Package runtime is the in-sandbox runtime server: the HTTP API a sandbox's
// container serves (on port 8888) so that programs outside can run commands
// and move files in it. It speaks upstream agent-sandbox's "legacy" protocol
// (examples/python-runtime-sandbox): the same paths, JSON shapes, status
// codes and error bodies, so upstream's SDKs and router work against it
// unchanged (see DATAPLANE.md).
//
// New returns an http.Handler, so the same server runs in the
// cmd/sandbox-runtime binary, in a local stand-in kubelet, or in a test.
//
// What it guarantees:
//
//   - Commands run without a shell: the command string is split as Python's
//     shlex.split splits it (Split) and executed directly, in the base
//     directory, with the runtime's environment and no stdin. "$HOME", "*",
//     "|" and ";" reach the program as plain bytes.
//   - A command gets its own process group and a timeout; when the timeout
//     passes or its request ends, the whole group is killed.
//   - Memory per request is bounded: stdout and stderr are each capped (the
//     rest is drained and dropped), request bodies and uploads are capped.
//   - Every file path is confined to the base directory after resolving
//     symlinks; a path that leaves it is answered with upstream's 403.
//   - With a token (Options.AuthToken), every request but the health checks
//     (GET /, GET /v1/health) must carry it in X-Sandbox-Runtime-Token, or
//     gets 401: the runtime serves only what came through the router. The
//     token is compared in constant time and never reaches the commands'
//     environment (SANDBOX_RUNTIME_TOKEN is removed from it).
//   - Browsers cannot drive it: a request from a page of another site (a
//     foreign Origin, Sec-Fetch-Site: cross-site) gets 403, and POST
//     /execute takes only a body sent as JSON (FastAPI's 422 otherwise, as
//     upstream's runtime answers). With Options.AllowedHosts (set by the
//     local cluster, whose runtimes listen on the developer's machine), a
//     Host that is neither one of its names nor an IP address gets 403, so
//     DNS rebinding cannot reach it either (package webguard).
//
// What it must never do: run anything through a shell or expand a command
// string, follow a path out of the base directory, buffer an unbounded
// request or output in memory, or leave a timed-out command's processes
// running. It must not import the controller (apply/, render/, policy/,
// webhooks/): it runs inside the sandbox, with nothing but the standard
// library, dataplane/shlex (which splits command lines) and
// dataplane/webguard (itself the standard library only). Resolve, its path
// confinement, and Guard (GuardWithHealth), its checks (token, Host
// allowlist, cross-site) as middleware, are shared with sandboxd
// (dataplane/sandboxd) and envd (dataplane/envd), which the same binary
// serves next to it.
//
// The confinement is the protocol's, not a security boundary: commands run
// with the runtime's own rights and can read and write anything those allow.
// A sandbox is isolated by its Pod (runtime class, security context, network
// policy), not by this server.
//
// With Options.Tracer set (--otlp-endpoint), each request of the legacy
// protocol is a server span (runtime.execute, runtime.upload, ...)
// continuing the request's traceparent; with it nil the handler is not
// wrapped at all.
package runtime
