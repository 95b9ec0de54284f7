package standin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Key names a Sandbox: the owner of a work directory and of at most one
// runtime process at a time.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Files of a Sandbox's directory, Dir/<namespace>/<sandbox>/.
const (
	stateFile  = "state.json"    // State
	workDir    = "work"          // the runtime's base directory and kubectl exec's working directory
	rawLog     = "runtime.out"   // the runtime's stdout and stderr, as it writes them
	criLog     = "container.log" // the same lines in the CRI format kwok's Logs read
	offsetFile = "log.offset"    // how much of rawLog is in criLog
)

// State is what the stand-in records about a Sandbox, so that a restarted
// stand-in finds its processes and knows whose directory it is.
type State struct {
	// SandboxUID is the Sandbox the directory belongs to (empty for a Pod
	// without a Sandbox owner).
	SandboxUID types.UID `json:"sandboxUID,omitempty"`
	// Pod and PodUID are the Pod the process runs for and its kwok objects
	// are named after; empty when no Pod runs.
	Pod    string    `json:"pod,omitempty"`
	PodUID types.UID `json:"podUID,omitempty"`
	// PID and Port are the runtime process and its legacy protocol's port
	// on 127.0.0.1; 0 when none runs.
	PID  int `json:"pid,omitempty"`
	Port int `json:"port,omitempty"`
	// RESTPort and GRPCPort are its sandboxd ports on 127.0.0.1 (0 for a
	// runtime started before it served sandboxd: those are not forwarded).
	RESTPort int `json:"restPort,omitempty"`
	GRPCPort int `json:"grpcPort,omitempty"`
	// EnvdPort is its envd port on 127.0.0.1 (0 for a runtime started
	// before it served envd: not forwarded).
	EnvdPort int `json:"envdPort,omitempty"`
}

// ports are where a runtime listens on 127.0.0.1, one for each port its
// Pod serves; 0 is none.
type ports struct {
	legacy, rest, grpc, envd int
}

func (s State) ports() ports {
	return ports{legacy: s.Port, rest: s.RESTPort, grpc: s.GRPCPort, envd: s.EnvdPort}
}

// KeyOf returns the Sandbox a Pod belongs to: its controller owner of kind
// Sandbox, or the Pod's own name when it has none.
func KeyOf(pod *corev1.Pod) (Key, types.UID) {
	if ref := sandboxv1beta1.ControllerOf(pod, sandboxv1beta1.SandboxKind); ref != nil {
		return Key{pod.Namespace, ref.Name}, ref.UID
	}
	return Key{pod.Namespace, pod.Name}, ""
}

// SandboxDir is the directory of a Sandbox under dir.
func SandboxDir(dir string, k Key) string { return filepath.Join(dir, k.Namespace, k.Name) }

// WorkDir is a Sandbox's work directory under dir: the runtime's base
// directory, where its commands run and its files live.
func WorkDir(dir string, k Key) string { return filepath.Join(SandboxDir(dir, k), workDir) }

func readState(sbDir string) (State, error) {
	var st State
	data, err := os.ReadFile(filepath.Join(sbDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	} else if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("%s: %w", filepath.Join(sbDir, stateFile), err)
	}
	return st, nil
}

// writeState replaces the state file atomically: a stand-in killed midway
// leaves the old state or the new one, never half of one.
func writeState(sbDir string, st State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(sbDir, stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(sbDir, stateFile))
}

// listKeys returns the Sandboxes that have a directory under dir.
func listKeys(dir string) ([]Key, error) {
	namespaces, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var keys []Key
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		sandboxes, err := os.ReadDir(filepath.Join(dir, ns.Name()))
		if err != nil {
			return nil, err
		}
		for _, sb := range sandboxes {
			if sb.IsDir() {
				keys = append(keys, Key{ns.Name(), sb.Name()})
			}
		}
	}
	return keys, nil
}

// removeSandboxDir removes a Sandbox's directory, and its namespace's
// directory once that is empty.
func removeSandboxDir(dir string, k Key) error {
	if err := os.RemoveAll(SandboxDir(dir, k)); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, k.Namespace)) // fails while other Sandboxes of the namespace have one
	return nil
}
