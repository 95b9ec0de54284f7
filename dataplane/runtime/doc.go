// Package runtime is the in-sandbox runtime server: the HTTP API a sandbox's
// container serves (port 8888) so that programs outside can run commands and
// move files in it, in upstream's "legacy" protocol byte for byte (paths,
// JSON shapes, status codes, error bodies; see DATAPLANE.md). New returns an
// http.Handler: the same server runs in cmd/sandbox-runtime, in the local
// stand-in kubelet and in tests.
//
// Rules (what it must never do):
//   - run anything through a shell or expand a command string (Split splits
//     as Python's shlex.split, and the program runs directly);
//   - follow a path out of the base directory (Resolve, after symlinks);
//   - buffer an unbounded request or output in memory;
//   - leave a timed-out or abandoned command's process group running;
//   - serve a request without the runtime token when it has one, let the
//     token reach a command, or be driven by a web page (Guard,
//     GuardWithHealth; package webguard);
//   - import the controller (apply/, render/, policy/, webhooks/): it runs
//     inside the sandbox with the standard library, dataplane/shlex and
//     dataplane/webguard only.
//
// Resolve and Guard are shared with sandboxd and envd, which the same binary
// serves. The confinement is the protocol's, not a security boundary: the
// Pod (runtime class, security context, network policy) isolates a sandbox.
// The user's guide is docs/runtime.md.
package runtime
