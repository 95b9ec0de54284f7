package main

import "testing"

// TestReleaserDecides: memory is released at the first quiet look after a
// busy spell, only when enough is free, and once per spell.
func TestReleaserDecides(t *testing.T) {
	const mib = 1 << 20
	var r releaser
	steps := []struct {
		allocated, free uint64
		want            bool
		why             string
	}{
		{0, 100 * mib, false, "the first look only starts counting"},
		{4 * mib, 100 * mib, false, "quiet, but nothing busy came before"},
		{200 * mib, 100 * mib, false, "busy"},
		{400 * mib, 100 * mib, false, "still busy"},
		{402 * mib, 8 * mib, false, "quiet after a busy spell, but little is free"},
		{403 * mib, 100 * mib, true, "quiet after a busy spell, much free"},
		{404 * mib, 100 * mib, false, "released already: nothing busy since"},
		{500 * mib, 100 * mib, false, "busy, but less than a spell's worth since the release"},
		{501 * mib, 100 * mib, false, "quiet, not enough allocated since the release"},
		{900 * mib, 100 * mib, false, "busy again"},
		{901 * mib, 100 * mib, true, "quiet after the second spell"},
	}
	for i, s := range steps {
		if got := r.decide(s.allocated, s.free); got != s.want {
			t.Errorf("step %d (%s): decide(%d MiB, %d MiB free) = %v, want %v", i, s.why, s.allocated/mib, s.free/mib, got, s.want)
		}
	}
}
