package e2e

import (
	"testing"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestLoopbackOnly: nothing of the local cluster or the controller running
// on it can be reached from another machine. Every socket their processes
// listen on (read from /proc, not from their flags) is on loopback.
func TestLoopbackOnly(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("checks the kwok cluster's own processes; not applicable with E2E_CLUSTER=kind")
	}
	socks, err := cluster.Listening(local, running.PID)
	if err != nil {
		t.Fatal(err)
	}
	assertLoopback(t, socks, "etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok-controller", "sandbox-control")
}

// assertLoopback fails the test if a socket is bound to anything but a
// loopback address, or if none of a process named in want (its comm, at
// most 15 characters) listens at all: a check that found nothing proves
// nothing.
func assertLoopback(t *testing.T, socks []tests.Socket, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, s := range socks {
		t.Logf("listening: %s", s)
		seen[s.Comm] = true
	}
	for _, s := range tests.NotLoopback(socks) {
		t.Errorf("reachable from other machines: %s", s)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no listening socket of %s found (among %d): the check cannot see it", w, len(socks))
		}
	}
}
