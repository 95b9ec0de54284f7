package faults

import (
	"syscall"
	"testing"
	"time"
)

// TestCrashMidBurst: 500 Sandboxes (50 with a PVC) and 50 claims on a pool
// of 20, first undisturbed, then with the controller killed (SIGKILL) a few
// seconds into the burst and a new one started in its place. Both runs must
// end with every invariant holding; the undisturbed run must log no error
// line.
func TestCrashMidBurst(t *testing.T) {
	c := newClient(t)
	const sandboxes, claims, poolSize = 500, 50, 20

	// Undisturbed.
	ctrl := startController(t, "undisturbed", "--leader-elect=false")
	ns := namespace(t, c, "crash-baseline")
	rec := record(t, ns)
	objs := burst{ns: ns, sandboxes: sandboxes, claims: claims, pool: poolSize}.objects(t, c)
	start := time.Now()
	if err := send(c, objs); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	waitFor(t, 10*time.Minute, "undisturbed burst converges", converged(c, ns))
	baseline := time.Since(start)
	inv := check(t, c, ns, rec)
	if err := ctrl.Stop(); err != nil {
		t.Errorf("stopping the controller: %v", err)
	}
	scan := scanErrors(t, ctrl.LogPath)
	report(t, map[string]any{"run": "undisturbed", "createSeconds": created.Seconds(), "convergeSeconds": baseline.Seconds(),
		"invariants": inv, "errorLines": scan.Lines, "examples": scan.Examples,
		"transientServerErrorLines": scan.Transient, "transientExamples": scan.TransientExamples})
	if inv.violations() > 0 {
		t.Errorf("undisturbed run: invariants violated: %+v", inv)
	}
	// The API server of a busy CI machine may time out for a moment; the
	// controller retries those. Any other error is the controller's.
	if scan.Lines > 0 {
		t.Errorf("undisturbed run logged %d error lines, e.g. %q", scan.Lines, scan.Examples)
	}

	// Killed a few seconds in.
	first := startController(t, "first", "--leader-elect=false")
	ns = namespace(t, c, "crash")
	rec = record(t, ns)
	objs = burst{ns: ns, sandboxes: sandboxes, claims: claims, pool: poolSize}.objects(t, c)
	start = time.Now()
	sent := make(chan error, 1)
	go func() { sent <- send(c, objs) }()
	time.Sleep(4 * time.Second)
	if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Since(start)
	if err := <-first.Exited(); err == nil {
		t.Fatal("the killed controller reports a clean exit")
	}
	seenAtKill := rec.podsSeen()
	second := startController(t, "second", "--leader-elect=false")
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Minute, "burst converges after the crash", converged(c, ns))
	crashed := time.Since(start)
	inv = check(t, c, ns, rec)
	errs, examples := errorLines(t, second.LogPath)
	firstErrs, _ := errorLines(t, first.LogPath)
	report(t, map[string]any{"run": "killed", "killedAfterSeconds": killedAt.Seconds(), "podsAtKill": seenAtKill,
		"convergeSeconds": crashed.Seconds(), "undisturbedSeconds": baseline.Seconds(),
		"invariants": inv, "errorLines": errs, "errorLinesBeforeKill": firstErrs, "examples": examples})
	if inv.violations() > 0 {
		t.Errorf("after the crash: invariants violated: %+v", inv)
	}
}
