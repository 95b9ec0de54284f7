// Package tests holds what the test suites share: locating the repository,
// its generated CRDs and the binaries `make` builds into bin/, starting
// processes and reading what they use (/proc, metrics).
//
// Sub-packages: envtest (a real kube-apiserver + etcd per test package),
// cluster (the local cluster of localcluster, plus fault injection),
// golden (golden files with a single -update flag), integration and e2e (the
// suites), bench, image (the Dockerfile's build stage, built without Docker)
// and tools (a separate Go module that builds the control plane from
// source). Nothing here may be imported by product code.
package tests
