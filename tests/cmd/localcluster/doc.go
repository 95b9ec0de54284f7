// Command localcluster starts what `make run` gives a newcomer: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes from
// bin/, with our CRDs and the gvisor and kata RuntimeClasses installed, and,
// with --controller, the controller binary (waiting for its /readyz) and the
// samples (--samples). It prints the kubeconfig path and waits; Ctrl-C (or
// SIGTERM) stops the controller and every cluster process. It is a
// development tool, not part of the product.
package main
