package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// Collecting in a pause of the work (--idle-collection).
//
// The collector starts a cycle when what was allocated since the last one
// reaches --gc-percent of the live heap, and only work allocates, so every
// cycle the collector starts on its own runs beside work: on two cores
// its dedicated mark worker takes one of them, for 0.4-0.7 s at 287 MiB
// live (20,000 Sandboxes), and the work beside it waits. Work comes in
// bursts (claims, a wave of Sandboxes) with pauses between them, and a
// burst of 100 claims and the pool's refill after it allocate about as
// much (137 MiB at 20,000 Sandboxes) as the collector lets the heap grow,
// so which burst a cycle meets is chance. A pause that has a quarter of
// the headroom used or more collects at once instead, so the next burst
// starts with all of it: the collector starts a cycle well before the
// goal (at 60-70 % of the headroom at 20,000 Sandboxes: 380 MiB of a
// 446 MiB goal with 281 MiB live), and in a run that collected pauses at
// half the headroom used, two bursts started with 40-60 MiB of garbage
// (a third of it) and met the next cycle's start within a second of
// their end. Half a second of quiet tells a pause (work allocates tens
// of MiB a second), and a pause is collected at most once.
const (
	// idleLookEvery is how often allocation is looked at (one read of five
	// runtime metrics, a few microseconds).
	idleLookEvery = 250 * time.Millisecond
	// idleBytes is the most a controller in a pause allocates between two
	// looks (4 MiB/s; a burst of claims allocates 45 MiB/s and more), and
	// idleLooks how many looks in a row must see no more.
	idleBytes = 1 << 20
	idleLooks = 2
	// idleMinGarbage is the least garbage worth a collection in a pause:
	// below it a small heap's next cycle is cheap wherever it lands.
	idleMinGarbage = 4 << 20
)

// idleLook is what a look of the idle collector sees: the cumulative
// bytes allocated, what was live at the last collection, the heap size at
// which the collector starts its next cycle (its goal), and the garbage
// allocated since the last collection (heap objects not live).
type idleLook struct {
	allocated, live, goal, garbage uint64
}

// idleCollector tells when a pause is worth a collection: at the
// idleLooks-th look in a row that saw less than idleBytes allocated (once
// per pause), when the garbage is a quarter or more of the headroom
// between the live heap and the goal, and at least idleMinGarbage.
type idleCollector struct {
	last  uint64 // bytes allocated at the last look (or at start)
	quiet int    // looks in a row that saw little allocated
}

// decide reports whether to collect now.
func (c *idleCollector) decide(l idleLook) bool {
	if l.allocated-c.last < idleBytes {
		c.quiet++
	} else {
		c.quiet = 0
	}
	c.last = l.allocated
	if c.quiet != idleLooks || l.goal <= l.live {
		return false
	}
	return l.garbage >= max(idleMinGarbage, (l.goal-l.live)/4)
}

// idleSamples are the runtime metrics an idle look reads: a heap look's.
func idleSamples() []metrics.Sample { return heapSamples() }

// idleLookOf reads an idle look from a heap look (heapLook).
func idleLookOf(s []metrics.Sample) idleLook {
	h := heapLook(s)
	return idleLook{allocated: h.allocated, live: h.heapLive, goal: h.heapGoal, garbage: h.heapGarbage}
}

// collectWhenIdle collects the heap in pauses of the work, as
// idleCollector decides, until ctx ends.
func collectWhenIdle(ctx context.Context, log logr.Logger) {
	samples := idleSamples()
	c := idleCollector{last: idleLookOf(samples).allocated}
	tick := time.NewTicker(idleLookEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l := idleLookOf(samples)
		if !c.decide(l) {
			continue
		}
		began := time.Now()
		runtime.GC()
		log.Info("idle: heap collected in a pause", "garbage", l.garbage, "live", l.live, "goal", l.goal, "took", time.Since(began))
		// The collection's own allocation is not work.
		c.last = idleLookOf(samples).allocated
	}
}
