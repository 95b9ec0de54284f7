// Package conformance is the wire conformance suite of the data plane: it
// replays, byte for byte, the requests upstream agent-sandbox's SDKs send in
// each of their connection modes (written as raw HTTP and gRPC from the
// facts of DATAPLANE.md, since upstream's SDKs cannot be installed here) and
// checks the answers of our router and runtime: status codes, the headers
// the SDKs read, and exact bodies.
//
// The modes: legacy (the runtime protocol on port 8888 through the router,
// as the Go SDK's direct mode and the Python SDK send it); sandboxd
// (upstream's standard runtime API over a port-forward to the sandbox Pod's
// 8080 and 9090, as the Go SDK's `Runtime: sandboxd` reaches it); our Go SDK
// with WithSandboxd; and port-forward to the router (portforward_test.go:
// the Go SDK's EndpointSlice lookup of sandbox-router-svc in the sandbox's
// namespace, the Python SDK's `kubectl port-forward svc/sandbox-router-svc`
// tunnel, and pods/portforward as the only way in).
//
// The harness (TestMain) brings up what `make run` runs through the same
// code (localcluster.Up), with binaries built from this tree; one cluster
// serves every test. With CONFORMANCE_KUBECONFIG (and
// CONFORMANCE_ROUTER_URL) set it attaches to a running cluster instead.
// Tests claim sandboxes from the sample warm pool (python-pool) as
// upstream's Go SDK does. They need the cluster binaries of `make tools`
// and are skipped under `go test -short`.
package conformance
