package tests

import (
	"time"

	"github.com/agentsandbox/reconciler/cmd/localcluster"
)

// FreeAddr returns a loopback address with a port that is free right now.
func FreeAddr() (string, error) { return localcluster.FreeAddr() }

// WaitReady polls http://<probe>/readyz until it answers 200, the process
// reports its exit on exited, or timeout passes.
func WaitReady(probe string, exited <-chan error, timeout time.Duration) error {
	return localcluster.WaitReady(probe, exited, timeout)
}
