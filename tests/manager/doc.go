// Package manager runs the controller's reconcilers in the test process
// against a given API server (envtest or the local cluster), with a
// transport that counts every request they send. It must never be imported by
// product code.
package manager
