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
//
// What it must never do: run anything through a shell or expand a command
// string, follow a path out of the base directory, buffer an unbounded
// request or output in memory, or leave a timed-out command's processes
// running. It must not import the controller (apply/, render/, policy/,
// webhooks/): it runs inside the sandbox, with nothing but the standard
// library (and dataplane/shlex, which splits command lines). Resolve, its
// path confinement, is shared with sandboxd (dataplane/sandboxd), which the
// same binary serves next to it.
//
// The confinement is the protocol's, not a security boundary: commands run
// with the runtime's own rights and can read and write anything those allow.
// A sandbox is isolated by its Pod (runtime class, security context, network
// policy), not by this server.
package runtime
