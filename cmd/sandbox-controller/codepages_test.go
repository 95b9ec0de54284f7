package main

import (
	"os"
	"runtime"
	"testing"
)

// The executable's pages are unmapped at the first quiet look after a busy
// spell (starting is one), once per spell.
func TestSpellsDecide(t *testing.T) {
	const mib = 1 << 20
	var s spells
	steps := []struct {
		allocated uint64
		want      bool
		why       string
	}{
		{70 * mib, false, "the first look only starts counting"},
		{72 * mib, true, "quiet after starting, which allocated 70 MiB"},
		{73 * mib, false, "released already: nothing busy since"},
		{100 * mib, false, "busy, but less than a spell's worth since the release"},
		{101 * mib, false, "quiet, not enough allocated since the release"},
		{300 * mib, false, "busy"},
		{302 * mib, true, "quiet after the spell"},
		{303 * mib, false, "quiet, released already"},
	}
	for i, st := range steps {
		if got := s.decide(st.allocated); got != st.want {
			t.Errorf("step %d (%s): decide(%d MiB) = %v, want %v", i, st.why, st.allocated/mib, got, st.want)
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
