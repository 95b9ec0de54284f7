// Package tools is a separate Go module that builds the real Kubernetes
// control plane (kube-apiserver, kube-controller-manager, kube-scheduler) and
// etcd from source for tests, so the main module's go.mod stays clean. It
// must never be imported by the product.
package tools
