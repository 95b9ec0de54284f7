// Package e2e holds the end-to-end tests that run on a full local cluster
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// nodes, see tests/cluster): real scheduling, garbage collection and Pods
// that become Running and Ready.
package e2e
