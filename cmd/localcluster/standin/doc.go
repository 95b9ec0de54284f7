// Package standin is the local cluster's stand-in kubelet: it makes the fake
// sandbox Pods of a kwok cluster real enough to use. For every sandbox Pod
// (labelled agents.x-k8s.io/sandbox-name-hash, bound to a node, not
// terminating) it runs one sandbox-runtime process on 127.0.0.1 with free
// ports and a work directory of its own (with --allowed-hosts, so that a web
// page cannot drive it through DNS rebinding), and creates the Pod's kwok
// PortForward (every port the runtime serves: 8888, the legacy protocol,
// sandboxd's 8080 REST and 9090 gRPC, and envd's 49983 (the E2B SDK's
// in-sandbox daemon), each to the process's matching
// listener), Exec (local, in the work
// directory) and Logs (the process's log, in the CRI format kwok reads)
// objects, named like the Pod. Then the API server's pods/portforward,
// pods/exec and pods/log reach the process: `kubectl port-forward`,
// `kubectl exec`, `kubectl logs`, the router's port-forward transport and the
// SDK's direct connection all work on the local cluster.
//
// A work directory belongs to the Sandbox (namespace/name, under
// Options.Dir), not to the Pod: it is kept while the Sandbox is suspended
// (its Pod deleted and recreated) and removed only once the Sandbox and the
// PVCs it owned are gone. The processes run in sessions of their own and are
// recorded in a state file next to the work directory, so a stand-in that
// restarts adopts the processes it finds alive and starts the missing ones;
// StopAll stops them all (SIGTERM, then SIGKILL for the runtime and whatever
// is left in its session).
//
// It lives under cmd/localcluster, not dataplane/, because it is development
// infrastructure of the kwok cluster (it acts on kwok's CRDs and on this
// machine's processes) and nothing that ships to a real cluster may depend
// on it; it uses client-go and the API types only. It must never bind
// anything but 127.0.0.1, never touch a Pod or a Sandbox (it only reads
// them), and never remove a work directory whose Sandbox or PVCs still
// exist. It isolates nothing: the runtime's commands run as the user who
// started the cluster, on this machine. It is for development only.
package standin
