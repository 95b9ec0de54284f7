package cluster

import (
	"fmt"
	"slices"

	"github.com/agentsandbox/reconciler/tests"
)

// Listening returns the sockets the cluster's processes (and the extra
// PIDs, say a controller's) listen on.
func Listening(c *Cluster, extra ...int) ([]tests.Socket, error) {
	pids := Processes(c.Dir())
	for _, p := range extra {
		if !slices.Contains(pids, p) { // a controller may already be among them
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no processes of cluster %q", c.Name)
	}
	return tests.Listening(pids...)
}
