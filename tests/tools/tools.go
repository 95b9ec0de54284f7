//go:build tools

// Package tools pins the Kubernetes control-plane commands built for tests.
// The binaries are built by the Makefile with `go build` from this module;
// this file keeps their packages in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)
