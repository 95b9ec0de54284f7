// Package integration holds the tests that need a real API server but no
// running controllers: CRD schemas, defaults and CEL validation, server-side
// apply with our generated apply configurations, and the samples. Each test
// runs in its own namespace of the package's envtest API server.
package integration
