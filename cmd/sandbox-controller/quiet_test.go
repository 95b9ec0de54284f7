package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// At a quiet look (the second in a row or later), the executable's pages
// are unmapped once they have grown back by codeGrownBytes since the last
// release (from none at start); from the fifth quiet look in a row
// (settled), once they have grown by settledBytes, and the heap is
// collected and returned once that gives back settledBytes or a
// heapGainShare-th of the live heap, whichever is more. Traffic that
// resumes before the fifth look puts the heap's release off.
func TestQuietReleaserDecides(t *testing.T) {
	const mib = 1 << 20
	q := quietReleaser{last: 70 * mib} // allocated at start
	steps := []struct {
		look               quietLook
		after              int64 // the executable's resident bytes once released
		wantCode, wantHeap bool
		why                string
	}{
		{quietLook{90 * mib, 46 * mib, 9 * mib, 12 * mib, 0, 0}, 0, false, false, "busy: still starting"},
		{quietLook{90 * mib, 47 * mib, 9 * mib, 12 * mib, 0, 0}, 0, false, false, "quiet once only"},
		{quietLook{90*mib + 512<<10, 47 * mib, 9 * mib, 12 * mib, 0, 0}, 8 * mib, true, false, "quiet twice after starting: 47 MiB of the executable resident; the heap waits"},
		{quietLook{90*mib + 512<<10, 8 * mib, 9 * mib, 12 * mib, 0, 0}, 0, false, false, "quiet three times: the heap waits"},
		{quietLook{90*mib + 512<<10, 8 * mib, 9 * mib, 12 * mib, 0, 0}, 0, false, false, "quiet four times: the heap waits"},
		{quietLook{91 * mib, 8 * mib, 9 * mib, 12 * mib, 0, 0}, 0, false, true, "quiet five times: 12 MiB to give back"},
		{quietLook{91 * mib, 8 * mib, 9 * mib, 1 * mib, 0, 0}, 0, false, false, "quiet, all given back already"},
		{quietLook{200 * mib, 30 * mib, 20 * mib, 30 * mib, 0, 0}, 0, false, false, "a wave runs"},
		{quietLook{200 * mib, 30 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, false, "a pause in the wave"},
		{quietLook{202 * mib, 30 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, false, "the wave goes on"},
		{quietLook{202 * mib, 30 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, false, "quiet once only"},
		{quietLook{202 * mib, 30 * mib, 20 * mib, 9 * mib, 0, 0}, 9 * mib, true, false, "quiet twice after the wave: grown by 22 MiB; the heap waits"},
		{quietLook{202 * mib, 9 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, false, "quiet three times"},
		{quietLook{202 * mib, 9 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, false, "quiet four times"},
		{quietLook{202 * mib, 9 * mib, 20 * mib, 9 * mib, 0, 0}, 0, false, true, "quiet five times after the wave: 9 MiB to give back"},
		{quietLook{202 * mib, 9 * mib, 20 * mib, 1 * mib, 0, 0}, 0, false, false, "quiet, all given back already"},
		{quietLook{300 * mib, 12 * mib, 200 * mib, 30 * mib, 0, 0}, 0, false, false, "busy"},
		{quietLook{300 * mib, 12 * mib, 200 * mib, 30 * mib, 0, 0}, 0, false, false, "quiet once"},
		{quietLook{300 * mib, 12 * mib, 200 * mib, 30 * mib, 0, 0}, 0, false, false, "quiet twice, but grown by 3 MiB only; the heap waits"},
		{quietLook{300 * mib, 12 * mib, 200 * mib, 30 * mib, 0, 0}, 0, false, false, "quiet three times"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 30 * mib, 0, 0}, 0, false, false, "traffic again before the fifth look: the heap's release put off"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 20 * mib, 0, 0}, 0, false, false, "quiet once"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 20 * mib, 0, 0}, 0, false, false, "quiet twice"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 20 * mib, 0, 0}, 0, false, false, "quiet three times"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 20 * mib, 0, 0}, 0, false, false, "quiet four times"},
		{quietLook{302 * mib, 12 * mib, 200 * mib, 20 * mib, 0, 0}, 9 * mib, true, false, "quiet five times, settled: the 3 MiB grown go; 20 MiB to give back, less than an eighth of 200 MiB live"},
		{quietLook{302 * mib, 10 * mib, 200 * mib, 25 * mib, 0, 0}, 0, false, true, "quiet, 25 MiB to give back, an eighth of 200 MiB live; 1 MiB grown stays"},
		{quietLook{302 * mib, -1, 200 * mib, 0, 0, 0}, 0, false, false, "both off: nothing looked at"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 30 * mib, 0, 0}, 0, false, false, "500 Sandboxes deleted"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 9 * mib / 2, 0, 0}, 0, false, false, "quiet once; the idle collector collected: 4.5 MiB of free pages left"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 9 * mib / 2, 0, 0}, 0, false, false, "quiet twice, grown by 2 MiB only: kept while not settled"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 9 * mib / 2, 0, 0}, 0, false, false, "quiet three times"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 9 * mib / 2, 0, 0}, 0, false, false, "quiet four times"},
		{quietLook{400 * mib, 11 * mib, 20 * mib, 9 * mib / 2, 0, 0}, 9 * mib, true, true, "quiet five times, settled: 2 MiB of the executable and 4.5 MiB of free pages go"},
	}
	for i, st := range steps {
		code, heap := q.decide(st.look)
		if code != st.wantCode || heap != st.wantHeap {
			t.Errorf("step %d (%s): decide = %v, %v, want %v, %v", i, st.why, code, heap, st.wantCode, st.wantHeap)
		}
		if code {
			q.codeBase = st.after
		}
	}
}

// A heap look sees the garbage of allocations since the last collection,
// and a collection with free pages returned takes it away.
func TestHeapLookSeesGarbage(t *testing.T) {
	samples := heapSamples()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	debug.FreeOSMemory()
	before := heapLook(samples)
	for range 64 {
		sink = make([]byte, 256<<10) // 16 MiB of garbage
	}
	sink = nil
	grown := heapLook(samples)
	if grown.heapGain < before.heapGain+15<<20 || grown.allocated < before.allocated+16<<20 {
		t.Fatalf("after allocating 16 MiB: %+v, before %+v", grown, before)
	}
	debug.FreeOSMemory()
	if after := heapLook(samples); after.heapGain >= grown.heapGain-8<<20 {
		t.Fatalf("after a collection: %+v, before it %+v", after, grown)
	}
}

// sink keeps the allocations of TestHeapLookSeesGarbage from being
// optimised away.
var sink []byte

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

// A release under loudBytes is logged at -v=1 only: once settled, whatever
// runs again maps a few MiB of code back and the next look gives them back.
func TestSizedLogsSmallReleasesQuietly(t *testing.T) {
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 0})
	sized(log, 2<<20).Info("small")
	if len(lines) != 0 {
		t.Fatalf("a 2 MiB release was logged at info level: %v", lines)
	}
	sized(log, loudBytes).Info("large")
	if len(lines) != 1 {
		t.Fatalf("an 8 MiB release was not logged at info level: %v", lines)
	}
	verbose := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	sized(verbose, 2<<20).Info("small")
	if len(lines) != 2 {
		t.Fatalf("a 2 MiB release was not logged at -v=1: %v", lines)
	}
}
