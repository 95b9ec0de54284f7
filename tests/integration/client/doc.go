// Package client tests the Go SDK (dataplane/client) against a real API
// server (envtest) with the controller's reconcilers running and a
// stand-in kubelet: Create makes the claim upstream's SDKs make and waits
// for it by watch, Close deletes it, and a sandbox that cannot be opened
// leaves no claim behind. The runtime is a small fake reached by base URL
// (envtest has no kubelet to port-forward to).
package client
