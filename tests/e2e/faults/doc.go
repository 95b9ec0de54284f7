// Package faults is the reliability part of the e2e suite: the real
// controller binary on the local cluster (real kube-apiserver, etcd, garbage
// collector, scheduler, kwok nodes) while things break: the controller is
// killed mid-burst, kube-apiserver stops for ten seconds, the leader of two
// replicas dies, another field manager edits the same objects, hostile
// objects arrive, and a tenant forges Sandboxes into another namespace's
// pool and claims. Each scenario checks the invariants afterwards (one Pod
// per running Sandbox with its Service and PVCs, one Sandbox per claim and
// one claim per Sandbox, no claim bound to a Sandbox its pool did not make,
// no orphaned Pods, no PVC lost while its Sandbox exists, everything
// Ready) and logs a REPORT line with its converge time,
// invariant counts and the controller's error-line count.
//
// It has its own cluster: restarting kube-apiserver must not disturb the
// other e2e tests.
package faults
