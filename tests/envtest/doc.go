// Package envtest starts one real kube-apiserver and etcd per test package
// (from the binaries `make` builds into bin/), installs the generated CRDs, and
// hands each test a fresh namespace. It is for tests that need real API
// server behaviour (defaulting, CEL validation, server-side apply); no
// controllers run there, so Pods never start unless a test runs the
// stand-in Kubelet (kubelet.go). CreatePool makes the template and warm
// pool most claim tests start from; UnderNamespacePolicy says whether a
// Pod falls under its namespace's default-deny NetworkPolicy (netpol.go).
// It must never be imported by product
// code.
package envtest
