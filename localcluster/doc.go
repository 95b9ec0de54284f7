// Package localcluster starts and stops the local Kubernetes cluster that
// `kubectl sandbox up` and `make run` give a user, and that the e2e tests and
// benchmarks run on: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the kwok controller, run as plain processes by kwokctl's
// binary runtime (no Docker). Fake kwok nodes run Pods to Running and Ready;
// scheduling, garbage collection and namespaces are the real thing. Every
// component, and the controller's webhook, metrics and probes, listens on
// 127.0.0.1 only (kwokctl's bindAddress, set in the configuration file it
// reads), so a development cluster is never reachable from the network.
//
// On top of the bare cluster it installs what the controller needs when it
// runs on this machine rather than in the cluster: the CRDs (embedded from
// config/crd; kube-controller-manager is then restarted, so that garbage
// collection knows them at once rather than at its next 30 s discovery
// resync), the gvisor and kata RuntimeClasses, the admission webhook and
// CRD conversion pointed at https://127.0.0.1:PORT, the controller's
// ServiceAccount and least-privilege RBAC (embedded from config/rbac), and
// the controller process itself, acting as that ServiceAccount as it does
// when deployed, started and stopped through a state file so that `down`
// finds what `up` started. It creates the cluster with kwok's PortForward,
// Exec and Logs CRDs enabled and runs the stand-in kubelet (package standin,
// as `kubectl-sandbox kubelet`), which gives every sandbox Pod a real
// sandbox-runtime process on this machine; it records the new cluster's API
// server (URL and CA) in the stand-in's directory, and the stand-in serves
// that cluster only; given the local router's port, the stand-in also gives
// every namespace upstream's Service sandbox-router-svc with a Ready Pod
// behind it whose port 8080 leads to that router, so upstream's SDKs find
// the router in their port-forward modes (the router starts first for
// that). The local router (StartRouter) reaches sandbox Pods where their
// kwok PortForward objects say the stand-in serves them (--transport=kwok;
// kind: --transport=port-forward). The local router and the runtimes
// refuse requests a web page could make (--allowed-hosts). Clusters on one machine are created one at a
// time (a lock file in the temporary directory, held while kwokctl
// creates one): kwokctl picks ports free at that moment, and two created
// at once could pick the same. The controller, router and stand-in are
// given loopback ports that are free when chosen; when another process
// takes one before they listen on it, they are started again on fresh
// ports (three tries). With Kind set it creates a kind
// cluster instead (Docker needed).
//
// It is a library of its own (not under cmd/, which holds flags and wiring
// only): only binaries and the test harness import it.
package localcluster
