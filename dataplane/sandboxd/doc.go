// Package sandboxd is the in-sandbox runtime's implementation of upstream
// agent-sandbox's standard runtime API (KEP 539.2, "sandboxd"), served next
// to the legacy protocol of dataplane/runtime by the same process:
//
//   - NewHandler: the REST API on port 8080 under /v1: the filesystem
//     (/v1/files/{path}: GET a file's bytes or a directory's listing, HEAD,
//     PUT with ?mode, DELETE with ?recursive), /v1/health and /v1/metadata;
//     errors are JSON {"code", "message"} with 400, 403, 404 and 409.
//   - NewGRPCServer / NewService: the gRPC service process.v1.ProcessService
//     on port 9090 (proto/process/v1/process.proto in this folder, generated into
//     processpb by make generate): Start (a stream: init, output, exit;
//     optionally on a PTY), Execute, WriteStdin, SendSignal, ResizeTTY.
//
// What it guarantees:
//
//   - Every file path and working directory is confined to the base
//     directory by the same code as the legacy protocol's
//     (runtime.Resolve): after resolving symlinks, a path that leaves it is
//     refused (403 PERMISSION_DENIED, or gRPC PERMISSION_DENIED). DELETE
//     removes a symlink itself, never what it points to.
//   - Programs run without a shell, each in a process group of its own
//     (a PTY's program in a session of its own) that is killed when its
//     Execute times out or is cancelled, or when its Start stream ends.
//   - A Start stream sends exactly one InitEvent first and one ExitEvent
//     last, with all output between them.
//   - Memory is bounded: Execute keeps at most MaxOutputBytes of each
//     stream, uploads are capped at MaxUploadBytes and streamed to disk.
//
// The handlers themselves check no credentials: Options.Middleware wraps the
// REST handler (cmd/sandbox-runtime passes runtime.Guard: the runtime's
// token, Host allowlist and cross-site refusal) and grpc.ServerOption
// interceptors wrap the gRPC server (RequireToken: the same token in the
// x-sandbox-runtime-token metadata of every call). Like dataplane/runtime,
// the confinement is the protocol's, not a security boundary (programs run
// with the runtime's
// rights), and the package must not import the controller (apply/,
// render/, policy/, webhooks/).
package sandboxd
