// Package envd is the in-sandbox runtime's implementation of the subset of
// E2B's in-sandbox daemon ("envd", port 49983) that the unmodified e2b SDK
// uses, served next to the legacy protocol (dataplane/runtime) and sandboxd
// (dataplane/sandboxd) by the same process:
//
//   - process.Process over the Connect protocol (Start and Connect streams,
//     List, SendInput, CloseStdin, SendSignal, Update for a PTY's size);
//   - filesystem.Filesystem over the Connect protocol (Stat, ListDir with a
//     depth, MakeDir, Remove, Move, and the WatchDir stream);
//   - plain HTTP: GET /files (a file's bytes), POST /files (multipart parts
//     "file" whose filename is the path, or a raw octet-stream body) and
//     GET /health.
//
// The messages come from proto/ (written from the SDK's wire facts; make
// generate turns them into envdpb/processpb and envdpb/filesystempb with
// the Connect handlers), and the Connect framing (unary JSON, streaming
// envelopes, the end-of-stream frame, error bodies) is connectrpc.com/connect's.
// Version is the envd version the control plane reports for it: the SDK
// turns features on by it, so it names only features served here.
//
// What it guarantees:
//
//   - Every path (file, directory, working directory, watch) is confined to
//     the base directory by the legacy protocol's own code (runtime.Resolve):
//     "/x" means <base>/x, a relative "x" is under the home directory
//     (Options.HomeDir, E2B's /home/user: <base>/home/user/x), symlinks are
//     resolved, and a path that leaves the base is refused with
//     permission_denied (403 on /files). Paths in answers are as the client
//     sees them: absolute, with the base as "/". Remove, Move and Stat act
//     on a symlink itself, never on what it points to.
//   - A program runs as the SDK asks (cmd with args, usually /bin/bash -l -c
//     <command>), in the home directory unless it asks for another, in a
//     process group of its own (a PTY's in a session of its own), with the
//     runtime's environment, HOME the home directory, plus the request's. It lives
//     until it exits or is signalled: the stream that started it may end
//     first (a background command), and Connect follows it again. Start
//     sends start{pid} before any output and end{...} last. Server.Close
//     kills every program still running.
//   - Errors are Connect codes the SDK maps: not_found, already_exists,
//     permission_denied, invalid_argument, failed_precondition.
//
// The handler checks no credential itself: Options.Middleware wraps it
// (cmd/sandbox-runtime passes the runtime's guard: its token, Host allowlist
// and cross-site refusal, with GET /health open). The E2B access token is the
// router's business (it checks and strips X-Access-Token); an Authorization
// header naming a user is accepted and ignored, as the sandbox has one user.
// Like the other protocols, the confinement is the protocol's, not a security
// boundary (programs run with the runtime's rights), and the package must not
// import the controller (apply/, render/, policy/, webhooks/).
package envd
