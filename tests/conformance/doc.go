// Package conformance is the wire conformance suite of the data plane: it
// replays, byte for byte, the requests upstream agent-sandbox's SDKs send in
// each of their connection modes (written as raw HTTP and gRPC from the
// facts of DATAPLANE.md, since upstream's SDKs cannot be installed here) and
// checks the answers of our router and runtime: status codes, the headers
// the SDKs read, and exact bodies.
//
// The modes:
//
//   - legacy: upstream's "legacy" runtime protocol (port 8888) through the
//     sandbox router, as the Go SDK's direct mode (APIURL = router) and the
//     Python SDK's direct connection send it: X-Sandbox-* headers, JSON
//     bodies, the multipart upload, `/` percent-encoded in paths, and the
//     router's own answers ({"detail": ...}, /healthz).
//   - sandboxd: upstream's standard runtime API (KEP 539.2) over the pod
//     tunnel, as the Go SDK's `Runtime: sandboxd` reaches it: a client-go
//     port-forward straight to the sandbox Pod's ports 8080 (REST file API,
//     /v1/health, /v1/metadata) and 9090 (gRPC process.v1.ProcessService,
//     through the generated client).
//   - our Go SDK (dataplane/client) with WithSandboxd(), against the same
//     sandbox.
//   - port-forward to the router (portforward_test.go): the Go SDK's
//     default mode (the EndpointSlices of sandbox-router-svc in the
//     sandbox's namespace, the first ready endpoint's targetRef Pod, a
//     client-go port-forward to its 8080, then the legacy calls with the
//     router headers) and the Python SDK's local tunnel (`kubectl
//     port-forward svc/sandbox-router-svc` in agent-sandbox-system,
//     resolved as kubectl resolves it, and run with kubectl itself when it
//     is on PATH); and the API server's pods/portforward check as the only
//     way in.
//
// The harness (TestMain) brings up what `make run` runs, through the same
// code (localcluster.Up): the kwok cluster, the controller, the stand-in
// kubelet with a sandbox-runtime per Pod, the host router and the samples;
// its binaries are built from this tree. One cluster serves every test of
// the package. With CONFORMANCE_KUBECONFIG (and CONFORMANCE_ROUTER_URL, the
// router `make run` printed) set, it attaches to a running cluster instead.
// Tests claim sandboxes from the sample warm pool (python-pool) as upstream's
// Go SDK does: a SandboxClaim with generateName "sandbox-claim-", then
// status.sandbox.name, then the Sandbox's Ready condition, the Pod's name
// from the annotation agents.x-k8s.io/pod-name.
//
// The tests need the cluster binaries of `make tools` in bin/ (or
// AGENT_SANDBOX_BIN); they are skipped under `go test -short`.
package conformance
