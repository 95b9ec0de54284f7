// Command kubectl-sandbox renders, validates and policy-checks agent-sandbox
// manifests offline, with the controller's own render and policy code, for
// GitOps pipelines and kubectl users (`kubectl sandbox ...` when on PATH).
// It is flags and wiring only.
package main
