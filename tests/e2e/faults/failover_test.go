package faults

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests"
)

// Leader election timings of controller-runtime's defaults, which the
// controller keeps.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// isLeader reports whether the controller at metrics holds the Lease.
func isLeader(metrics string) (bool, error) {
	m, err := scrape(metrics)
	if err != nil {
		return false, err
	}
	for series, v := range m {
		if strings.HasPrefix(series, "leader_election_master_status{") && v == 1 {
			return true, nil
		}
	}
	return false, nil
}

// TestLeaderFailover runs two replicas with leader election, kills the
// leader (SIGKILL: the Lease is not released) a few seconds into a burst of
// 300 Sandboxes and 30 claims, and checks that the other replica takes over
// within the lease duration and that nothing was done twice: no Sandbox got
// a second Pod, no claim a second Sandbox.
func TestLeaderFailover(t *testing.T) {
	c := newClient(t)
	a := startController(t, "a", "--leader-elect=true")
	b := startController(t, "b", "--leader-elect=true")
	var leader, follower *tests.Controller
	waitFor(t, time.Minute, "a leader is elected", func() error {
		la, _ := isLeader(a.Metrics)
		lb, _ := isLeader(b.Metrics)
		switch {
		case la && lb:
			t.Fatal("both replicas lead")
		case la:
			leader, follower = a, b
		case lb:
			leader, follower = b, a
		default:
			return fmt.Errorf("no leader yet")
		}
		return nil
	})

	ns := namespace(t, c, "failover")
	rec := record(t, ns)
	objs := burst{ns: ns, sandboxes: 300, claims: 30, pool: 10}.objects(t, c)
	start := time.Now()
	sent := make(chan error, 1)
	go func() { sent <- send(c, objs) }()
	time.Sleep(3 * time.Second)
	podsAtKill := rec.podsSeen()
	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := <-leader.Exited(); err == nil {
		t.Fatal("the killed leader reports a clean exit")
	}
	waitFor(t, 2*leaseDuration, "the follower takes over", func() error {
		if ok, err := isLeader(follower.Metrics); !ok {
			return fmt.Errorf("not leader yet (%w)", err)
		}
		return nil
	})
	takeover := time.Since(killed)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Minute, "burst converges under the new leader", converged(c, ns))
	took := time.Since(start)
	inv := check(t, c, ns, rec)
	errs, examples := errorLines(t, follower.LogPath)
	report(t, map[string]any{"takeoverSeconds": takeover.Seconds(), "leaseDurationSeconds": leaseDuration.Seconds(),
		"podsAtKill": podsAtKill, "convergeSeconds": took.Seconds(), "invariants": inv, "errorLines": errs, "examples": examples})
	if inv.violations() > 0 {
		t.Errorf("invariants violated: %+v", inv)
	}
	// The Lease expires leaseDuration after the leader's last renewal and
	// the follower tries every retryPeriod: takeover is about
	// leaseDuration + retryPeriod, reported above. It is a figure, not a
	// pass mark (a busy machine delays the follower's next try); what must
	// hold is that the follower takes over within 2 × leaseDuration (the
	// wait above) and that nothing is lost or made twice.
}
