// Command sandbox-runtime is the in-sandbox runtime server: it runs in a
// sandbox's container and serves upstream agent-sandbox's legacy runtime
// protocol on :8888 (run commands, upload, download, list, check files), and
// upstream's standard runtime API, sandboxd, on :8080 (REST, /v1/files) and
// :9090 (gRPC process.v1.ProcessService), and the subset of E2B's in-sandbox
// daemon (envd) that the e2b SDK uses on :49983, so that the router, the
// SDKs and kubectl sandbox exec can reach the sandbox. An empty address (or
// off) turns a protocol off.
//
// It is flags, environment and wiring only: the protocols, the command
// execution and the path confinement live in dataplane/runtime,
// dataplane/sandboxd and dataplane/envd. As it starts it sends its own
// legacy server a health check and one command over loopback (--warm-up),
// so a client's first request finds the code paths warm. It reads upstream's SANDBOX_BASE_DIR and
// SANDBOX_EXEC_TIMEOUT_SECONDS and ours (SANDBOX_MAX_OUTPUT_BYTES,
// SANDBOX_MAX_UPLOAD_BYTES, SANDBOX_LISTEN_ADDRESS, SANDBOX_ENVD_ADDRESS,
// SANDBOX_ALLOWED_HOSTS);
// flags override them. The token the router must send comes from
// --auth-token-file or SANDBOX_RUNTIME_TOKEN, which is removed from the
// environment at start, so no command sees it (on Linux the runtime execs
// itself without it and reads it from a pipe, so that /proc/<pid>/environ
// does not show it either: hidetoken.go); sandboxd and envd are behind
// the same guard as the legacy protocol (the token on every REST request but
// GET /v1/health, on every gRPC call and on every envd request but GET
// /health; the Host allowlist and the cross-site refusal on REST and envd).
// On SIGTERM it stops accepting requests, lets running ones finish for
// --shutdown-timeout, then kills the process groups of the commands still
// running (envd's background commands included).
//
// It must never run commands through a shell, and never import the
// controller's packages: it ships into sandbox images on its own.
package main
