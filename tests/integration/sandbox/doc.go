// Package sandbox tests the Sandbox reconciler against a real API server
// (envtest). No kubelet runs there, so tests play its part by writing Pod
// status; garbage collection is covered by the e2e suite.
package sandbox
