// Package e2e holds the end-to-end tests that run on a full local cluster
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// nodes, see tests/cluster): real scheduling, garbage collection and Pods
// that become Running and Ready, each served by a sandbox-runtime process
// that the stand-in kubelet runs (port-forward, exec and logs reach it).
package e2e
