// Command kubectl-sandbox renders, validates and policy-checks agent-sandbox
// manifests offline, with the controller's own render and policy code, for
// GitOps pipelines and kubectl users (`kubectl sandbox ...` when on PATH),
// previews changes against a cluster, runs commands in and copies files to
// and from sandboxes, and starts a local cluster. Its commands are cobra
// commands with kubectl's own flags (k8s.io/cli-runtime's ConfigFlags) and
// shell completion; cmd/kubectlplugin keeps the single-dash spellings of
// its earlier flags working and lists names for completion. It is flags and
// wiring only.
package main
