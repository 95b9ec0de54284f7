// Package tests holds what the test suites share: locating the repository,
// its generated CRDs and the binaries `make` builds into bin/.
//
// Sub-packages: envtest (a real kube-apiserver + etcd per test package),
// cluster (a full local cluster with kwok nodes), golden (golden files with a
// single -update flag), integration and e2e (the suites), tools (a separate Go
// module that builds the control plane from source) and cmd/localcluster
// (what `make run` starts). Nothing here may be imported by product code
// except through cmd/.
package tests
