// Package envd is the in-sandbox runtime's implementation of the subset of
// E2B's in-sandbox daemon ("envd", port 49983) that the unmodified e2b SDK
// uses: process.Process and filesystem.Filesystem over the Connect protocol
// (connectrpc.com/connect, messages generated from proto/ into envdpb), and
// GET/POST /files and GET /health, served next to the legacy protocol and
// sandboxd by the same process. Version names the envd version reported for
// it: the SDK turns features on by it, so it names only features served here.
//
// Rules:
//   - Every path is confined to the base directory by runtime.Resolve ("/x"
//     is <base>/x, a relative "x" is under the home directory); a path that
//     leaves it is permission_denied. Remove, Move and Stat act on a symlink
//     itself, never on its target.
//   - A program runs in a process group of its own (a PTY's in its own
//     session) and lives until it exits or is signalled, not as long as its
//     stream; Start sends start{pid} first and end{...} last; Server.Close
//     kills what is left.
//   - The handler checks no credential itself: Options.Middleware wraps it
//     with the runtime's guard; the E2B access token is the router's.
//   - It must not import the controller (apply/, render/, policy/, webhooks/).
//
// The confinement is the protocol's, not a security boundary. The user's
// guide is docs/runtime.md#envd.
package envd
