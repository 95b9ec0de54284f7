// Command localcluster starts the local cluster that `make run` gives a
// newcomer: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok nodes from bin/, with our CRDs and the gvisor and kata RuntimeClasses
// installed. It prints the kubeconfig path and waits; Ctrl-C (or SIGTERM)
// stops every process it started. It is a development tool, not part of the
// product.
package main
