// Package helm renders the Helm chart (charts/agent-sandbox) and the
// kustomize bundles (config/) in-process, with the Helm Go SDK and
// kustomize's krusty API (no helm or kustomize binary), into objects that
// tests compare, lint and apply. Its tests check that the chart lints,
// that its values schema refuses bad values, that it renders the same
// objects as the kustomize bundle with the same settings, and (against
// envtest's real API server) that everything it renders passes a
// server-side dry-run apply. It must never be imported by product code.
package helm
