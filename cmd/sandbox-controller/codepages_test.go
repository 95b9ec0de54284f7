package main

import (
	"os"
	"runtime"
	"testing"
)

// The executable's pages are unmapped at a quiet look once they have grown
// back by codeGrownBytes since the last release (from none at start).
func TestCodeReleaserDecides(t *testing.T) {
	const mib = 1 << 20
	var c codeReleaser
	steps := []struct {
		allocated       uint64
		resident, after int64 // after: resident once released
		want            bool
		why             string
	}{
		{70 * mib, 45 * mib, 0, false, "the first look only starts counting"},
		{90 * mib, 46 * mib, 0, false, "busy: still starting"},
		{92 * mib, 47 * mib, 8 * mib, true, "quiet after starting, 47 MiB of the executable resident"},
		{93 * mib, 8 * mib, 0, false, "quiet, unmapped already"},
		{200 * mib, 30 * mib, 0, false, "a wave runs"},
		{201 * mib, 30 * mib, 9 * mib, true, "quiet after the wave, grown by 22 MiB"},
		{202 * mib, 9 * mib, 0, false, "quiet, unmapped already"},
		{300 * mib, 12 * mib, 0, false, "busy"},
		{301 * mib, 12 * mib, 0, false, "quiet, but grown by 3 MiB only"},
	}
	for i, st := range steps {
		if got := c.decide(st.allocated, st.resident); got != st.want {
			t.Errorf("step %d (%s): decide(%d MiB, %d MiB) = %v, want %v", i, st.why, st.allocated/mib, st.resident/mib, got, st.want)
		}
		if st.want {
			c.base = st.after
		}
	}
}

// Unmapping the executable's pages brings its resident pages down, and the
// code runs on (what it needs is mapped again).
func TestReleaseExecutablePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux unmaps the executable's pages")
	}
	before, after, err := releaseExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	if before <= 0 || after <= 0 || after >= before {
		t.Fatalf("resident file-backed bytes %d before, %d after", before, after)
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil { // runs on
		t.Fatal(err)
	}
	t.Logf("file-backed resident %d KiB → %d KiB", before>>10, after>>10)
}
