// Package cluster gives e2e tests and benchmarks the local cluster of
// localcluster (what `kubectl sandbox up` and `make run` start: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes, as
// plain processes, no Docker), built from the binaries in bin/, or a kind
// cluster with E2E_CLUSTER=kind. It adds what only tests need: stopping and
// restarting a single control-plane component to inject faults, and the
// stand-in kubelet run inside the test process (StartStandIn), which a test
// can crash and start again.
package cluster
