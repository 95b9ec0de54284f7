// Package standin is the local cluster's stand-in kubelet: it makes the fake
// sandbox Pods of a kwok cluster real enough to use. For every sandbox Pod it
// runs one sandbox-runtime process on 127.0.0.1 with a work directory of its
// own, and creates the Pod's kwok PortForward, Exec and Logs objects, so that
// pods/portforward, pods/exec and pods/log (kubectl, the router's
// port-forward transport, the SDK) reach that process. Given the host
// router's port (Options.RouterPort), it also puts a sandbox-router Pod and
// the Service sandbox-router-svc in every namespace, where upstream's SDKs
// look for the router in their port-forward modes.
//
// Rules:
//   - It binds nothing but 127.0.0.1, and runs only against the local
//     cluster it was made for (its kubeconfig must reach the recorded API
//     server on this machine).
//   - It only reads sandbox Pods and Sandboxes; the only Pods it writes are
//     its router Pods.
//   - A work directory belongs to the Sandbox, not to its Pod: it is removed
//     only once the Sandbox and the PVCs it owned are gone.
//   - Processes are recorded in a state file, so a restarted stand-in adopts
//     the live ones; StopAll stops them all.
//   - Nothing that ships to a real cluster may depend on it (it lives under
//     localcluster, not dataplane/). It isolates nothing: commands run as the
//     user who started the cluster. It is for development only.
//
// The user's guide is docs/local-cluster.md.
package standin
