package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// StandIn is a stand-in kubelet running in this process (see
// localcluster/standin): a sandbox-runtime process per sandbox Pod of
// the cluster, reachable through kubectl exec, port-forward and logs.
type StandIn struct {
	*standin.StandIn
	// Dir holds the Sandboxes' directories (Cluster.SandboxDir).
	Dir    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartStandIn starts the stand-in kubelet on c with the sandbox-runtime
// binary runtime and waits until its Pod cache has synced.
func StartStandIn(c *Cluster, runtime string, log *slog.Logger) (*StandIn, error) {
	s, err := standin.New(standin.Options{Config: c.Config, Dir: c.SandboxDir(), Runtime: runtime, Logger: log, Resync: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &StandIn{StandIn: s, Dir: c.SandboxDir(), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- s.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !s.Ready() {
		select {
		case err := <-h.done:
			cancel()
			return nil, errors.Join(errors.New("stand-in kubelet: stopped before it was ready"), err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("stand-in kubelet not ready after a minute")
		}
	}
	return h, nil
}

// Crash ends the stand-in as a kill would: its runtime processes go on
// running, for the next stand-in to adopt.
func (s *StandIn) Crash() error {
	s.once.Do(func() { s.cancel(); s.err = <-s.done })
	return s.err
}

// Stop ends the stand-in and stops every runtime process it ran.
func (s *StandIn) Stop() error {
	return errors.Join(s.Crash(), standin.StopAll(s.Dir, 10*time.Second))
}
