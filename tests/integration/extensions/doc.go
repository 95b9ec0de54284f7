// Package extensions tests the SandboxTemplate, SandboxWarmPool and
// SandboxClaim controllers against a real API server (envtest), with a
// stand-in kubelet and no garbage collector: what GC would do is checked on
// the local cluster by the e2e suite.
package extensions
