package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// LoopbackAddress is the only address the local cluster listens on: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, the kwok
// controller, and the local controller's webhook, metrics and probes. Nothing
// of a development cluster (whose admin credentials sit in the working
// directory) is reachable from another machine.
const LoopbackAddress = "127.0.0.1"

// kwokConfig is kwokctl's configuration for our clusters. Its bindAddress
// (0.0.0.0 unless set) is what kwokctl's binary runtime gives every
// component: etcd's client and peer URLs, the API server's --bind-address
// (and so its advertise address), the controller manager's and the
// scheduler's --bind-address, and kwok's --server-address. The scheduler
// and the controller manager run alone: without leader election, a
// machine too loaded to renew a lease in time (thousands of Pods on two
// cores) does not stop them for good, leaving every new Pod Pending.
const kwokConfig = `# Written by kubectl-sandbox up: every component listens on loopback only.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: ` + LoopbackAddress + `
componentsPatches:
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
`

// apiServerGCTrace is the patch of kwokConfig that has kube-apiserver
// trace its collections (Options.APIServerGCTrace).
const apiServerGCTrace = `- name: kube-apiserver
  extraEnvs:
  - name: GODEBUG
    value: gctrace=1
`

// writeKwokConfig writes kwokctl's configuration as workdir/kwok.yaml, the
// file kwokctl reads by default with KWOK_WORKDIR=workdir, so that no other
// configuration (the user's ~/.kwok/kwok.yaml) comes first; with gcTrace,
// kube-apiserver traces its collections.
func writeKwokConfig(workdir string, gcTrace bool) (string, error) {
	p := filepath.Join(workdir, "kwok.yaml")
	config := kwokConfig
	if gcTrace {
		config += apiServerGCTrace
	}
	if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
		return "", fmt.Errorf("writing kwokctl's configuration: %w", err)
	}
	return p, nil
}

// createArgs are kwokctl's arguments to create a cluster from the binaries
// (by name: etcd, kube-apiserver, ...). --config comes first: kwokctl reads
// it before the rest of the command line. --enable-crds installs kwok's
// PortForward, Exec and Logs CRDs and has the kwok controller watch them:
// the stand-in kubelet's per-Pod objects that send `kubectl port-forward`,
// `exec` and `logs` to a local process.
func createArgs(name, config string, binaries map[string]string) []string {
	args := []string{"--config", config, "create", "cluster", "--name", name, "--runtime", "binary",
		"--disable-qps-limits", "--wait", "3m", "--enable-crds=" + strings.Join(standin.KwokCRDs, ",")}
	for _, b := range binaryFlags {
		args = append(args, b.flag, binaries[b.name])
	}
	return args
}
