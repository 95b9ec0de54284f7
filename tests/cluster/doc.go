// Package cluster starts and stops a full local Kubernetes cluster for e2e
// tests, benchmarks and `make run`: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kwok controller, run as
// plain processes by kwokctl's binary runtime from the binaries `make` builds
// into bin/. Fake kwok nodes run Pods to Running and Ready with an IP; garbage
// collection, scheduling and namespaces are the real thing. No Docker is
// needed. It must never be imported by product code except through cmd/.
package cluster
