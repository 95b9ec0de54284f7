package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// A pause is collected at its second quiet look when its garbage is a
// quarter of the headroom or more (and at least idleMinGarbage), and only
// once; work that goes on, or a pause with little garbage, is left to the
// collector.
func TestIdleCollectorDecides(t *testing.T) {
	const mib = 1 << 20
	c := idleCollector{last: 100 * mib}
	steps := []struct {
		look idleLook
		want bool
		why  string
	}{
		{idleLook{140 * mib, 280 * mib, 420 * mib, 40 * mib}, false, "a burst"},
		{idleLook{200 * mib, 280 * mib, 420 * mib, 100 * mib}, false, "the burst goes on"},
		{idleLook{200*mib + 100<<10, 280 * mib, 420 * mib, 100 * mib}, false, "quiet once"},
		{idleLook{200*mib + 200<<10, 280 * mib, 420 * mib, 100 * mib}, true, "quiet twice, 100 of 140 MiB headroom used"},
		{idleLook{200*mib + 300<<10, 280 * mib, 420 * mib, 1 * mib}, false, "quiet on: this pause was collected"},
		{idleLook{200*mib + 300<<10, 280 * mib, 420 * mib, 100 * mib}, false, "quiet on: a pause is looked at once"},
		{idleLook{230 * mib, 280 * mib, 420 * mib, 30 * mib}, false, "work again"},
		{idleLook{230 * mib, 280 * mib, 420 * mib, 30 * mib}, false, "quiet once"},
		{idleLook{230 * mib, 280 * mib, 420 * mib, 30 * mib}, false, "quiet twice, 30 of 140 MiB used, under a quarter: the collector's to decide"},
		{idleLook{300 * mib, 280 * mib, 420 * mib, 100 * mib}, false, "work"},
		{idleLook{301 * mib, 280 * mib, 420 * mib, 100 * mib}, false, "1 MiB in a look is not quiet"},
		{idleLook{301 * mib, 280 * mib, 420 * mib, 100 * mib}, false, "quiet once"},
		{idleLook{301 * mib, 280 * mib, 420 * mib, 35 * mib}, true, "quiet twice, exactly a quarter used"},
		{idleLook{320 * mib, 10 * mib, 15 * mib, 3 * mib}, false, "a small heap's work"},
		{idleLook{320 * mib, 10 * mib, 15 * mib, 3 * mib}, false, "quiet once"},
		{idleLook{320 * mib, 10 * mib, 15 * mib, 3 * mib}, false, "quiet twice, most of a small headroom used but under idleMinGarbage"},
		{idleLook{330 * mib, 10 * mib, 10 * mib, 9 * mib}, false, "work at the memory limit"},
		{idleLook{330 * mib, 10 * mib, 10 * mib, 9 * mib}, false, "quiet once"},
		{idleLook{330 * mib, 10 * mib, 10 * mib, 9 * mib}, false, "quiet twice, no headroom (goal at live): the collector's to decide"},
	}
	for i, st := range steps {
		if got := c.decide(st.look); got != st.want {
			t.Errorf("step %d (%s): decide = %v, want %v", i, st.why, got, st.want)
		}
	}
}

// An idle look sees the garbage allocated since the last collection and a
// goal above the live heap, and a collection takes the garbage away.
func TestIdleLookSeesGarbage(t *testing.T) {
	samples := idleSamples()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	runtime.GC()
	before := idleLookOf(samples)
	for range 64 {
		sink = make([]byte, 256<<10) // 16 MiB of garbage
	}
	sink = nil
	grown := idleLookOf(samples)
	if grown.garbage < before.garbage+15<<20 || grown.allocated < before.allocated+16<<20 {
		t.Fatalf("after allocating 16 MiB: %+v, before %+v", grown, before)
	}
	debug.SetGCPercent(50)
	runtime.GC()
	after := idleLookOf(samples)
	if after.garbage >= grown.garbage-8<<20 || after.goal <= after.live {
		t.Fatalf("after a collection: %+v, before it %+v", after, grown)
	}
}

// A pause after garbage was made is collected within a second, and once.
func TestCollectWhenIdleCollectsAPause(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	live := make([][]byte, 0, 256)
	for range 256 {
		live = append(live, make([]byte, 256<<10)) // 64 MiB live
	}
	runtime.GC()
	forced := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(forced)
	before := forced[0].Value.Uint64()
	for range 40 {
		sink = make([]byte, 256<<10) // 10 MiB of garbage: above idleMinGarbage and a quarter of the 32 MiB headroom, below where the collector starts
	}
	sink = nil
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { collectWhenIdle(ctx, testr.New(t)); close(done) }()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	metrics.Read(forced)
	if n := forced[0].Value.Uint64() - before; n != 1 {
		t.Fatalf("%d collections forced in a pause, want 1", n)
	}
	runtime.KeepAlive(live)
}
