package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// Giving memory back once quiet (--release-code-pages, --release-free-heap).
//
// Starting (the init of some 1200 packages, the CRD schemas and the
// policies compiled, the caches filled) and every wave (thousands of
// Sandboxes created, suspended or deleted) run code that a quiet
// controller does not run again, and the kernel maps in more around each
// page it faults in. Those pages of the executable stay mapped: measured
// with 500 Sandboxes (tests/memprobe), 52 MiB of the executable resident
// of 94 MiB in all; unmapped once started, the wave making the 500 mapped
// 22 MiB again, and a quiet controller keeps 7 MiB mapped. They are clean
// copies of the file, so unmapping them loses nothing: the page cache
// keeps them, and what runs again is mapped again by a minor fault.
//
// A wave also leaves the heap larger than what stays live: the garbage of
// its last requests (up to --gc-percent of the live heap, which a quiet
// controller allocating little does not collect for minutes) and the
// spans freed since the last collection, which the runtime's scavenger
// returns to the kernel slowly. When that is worth it, a quiet controller
// collects and returns the free pages at once (debug.FreeOSMemory).
const (
	// quietLookEvery is how often allocation and the resident pages are
	// looked at (reading both costs tens of microseconds).
	quietLookEvery = 2 * time.Second
	// quietBytes is the most a quiet controller allocates in
	// quietLookEvery, and quietLooks how many looks in a row must see it
	// quiet before the executable's pages are unmapped (~1 ms). Measured
	// with 500 Sandboxes (tests/memprobe): idle, 0-20 KiB in 2 s;
	// creating, suspending or resuming them, 25-130 MiB.
	quietBytes = 1 << 20
	quietLooks = 2
	// quietHeapLooks is how many quiet looks in a row the heap's release
	// waits for. It costs a full collection: 0.18-0.88 s of CPU at 290 MiB
	// live (20,000 Sandboxes), where traffic that resumes after a pause of
	// a few seconds (a burst of claims once the pool has refilled) ran
	// into it. Ten seconds of quiet makes that rarer; the memory is given
	// back six seconds later than the code pages.
	quietHeapLooks = 5
	// codeGrownBytes is how far the file-backed resident pages must have
	// grown since the last release (or from none, at start) for another
	// after quietLooks: a pause between bursts leaves the pages the next
	// burst runs mapped.
	codeGrownBytes = 8 << 20
	// settledBytes is the least a release gives back once quiet for
	// quietHeapLooks (settled): of the executable's pages grown since the
	// last release, and of what a collection and return of free pages
	// gives back, or 1/heapGainShare of the live heap if that is more. A
	// large heap, whose collection costs more (~40 ms for 90 MiB live), is
	// collected when quiet no more than four times as often as the
	// collector would anyway (--gc-percent=50: after live/2 allocated); a
	// small heap's costs a few ms at 20 MiB live, and once the idle
	// collector has collected a pause (idlegc.go) what is left to give
	// back is free pages the scavenger returns slowly, a few MiB at 500
	// Sandboxes.
	settledBytes  = 2 << 20
	heapGainShare = 8
	// loudBytes is the least a release gives back to be logged at info
	// level; smaller ones are logged at -v=1. Once settled, whatever runs
	// again maps a few MiB of code back and the next look gives them back:
	// at info level that was a line every few looks while a run ended.
	loudBytes = 8 << 20
)

// quietLook is what a look sees: the cumulative bytes allocated, the
// file-backed resident bytes (negative: not released, or unknown), and of
// the heap what was live at the last collection and what a collection and
// return of free pages would give back (heapGain).
type quietLook struct {
	allocated    uint64
	codeResident int64
	heapLive     uint64
	heapGain     uint64
	// heapGarbage is the heap's objects not live (part of heapGain), and
	// heapGoal the heap size at which the collector's next cycle is due.
	heapGarbage, heapGoal uint64
}

// quietReleaser tells when to give memory back: at a quiet look (little
// allocated since the last, quietLooks times in a row), the executable's
// pages once they have grown by codeGrownBytes since last unmapped; at
// the quietHeapLooks-th quiet look in a row or later, the executable's
// pages once they have grown by settledBytes, and the heap's garbage and
// free pages once they would give back settledBytes or a
// heapGainShare-th of the live heap, whichever is more.
type quietReleaser struct {
	last     uint64 // bytes allocated at the last look (or at start)
	quiet    int    // looks in a row that saw little allocated
	codeBase int64  // file-backed resident bytes after the last release
}

// decide reports what to release now.
func (q *quietReleaser) decide(l quietLook) (code, heap bool) {
	if l.allocated-q.last < quietBytes {
		q.quiet++
	} else {
		q.quiet = 0
	}
	q.last = l.allocated
	if q.quiet < quietLooks {
		return false, false
	}
	settled := q.quiet >= quietHeapLooks
	grown := l.codeResident - q.codeBase
	code = l.codeResident >= 0 && (grown >= codeGrownBytes || settled && grown >= settledBytes)
	heap = settled && l.heapGain >= max(settledBytes, l.heapLive/heapGainShare)
	return code, heap
}

// heapSamples are the runtime metrics a look reads, in heapLook's order.
func heapSamples() []metrics.Sample {
	return []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/goal:bytes"},
	}
}

// heapLook reads the heap's part of a look: what was allocated, what was
// live at the last collection, and what collecting and returning free
// pages would give back (objects not live, whether or not swept yet, and
// free pages not yet returned).
func heapLook(s []metrics.Sample) quietLook {
	metrics.Read(s)
	allocated, live := s[0].Value.Uint64(), s[1].Value.Uint64()
	objects, free := s[2].Value.Uint64(), s[3].Value.Uint64()
	l := quietLook{allocated: allocated, heapLive: live, heapGain: free, codeResident: -1, heapGoal: s[4].Value.Uint64()}
	if objects > live {
		l.heapGarbage = objects - live
	}
	l.heapGain += l.heapGarbage
	return l
}

// releaseWhenQuiet gives memory back as quietReleaser decides until ctx
// ends: the executable's pages if code, the heap's free pages if heap.
func releaseWhenQuiet(ctx context.Context, log logr.Logger, code, heap bool) {
	samples := heapSamples()
	q := quietReleaser{last: heapLook(samples).allocated}
	tick := time.NewTicker(quietLookEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l := heapLook(samples)
		if code {
			l.codeResident = rssFile()
		}
		if !heap {
			l.heapGain = 0
		}
		releaseCode, releaseHeap := q.decide(l)
		if releaseCode {
			began := time.Now()
			before, after, err := releaseExecutablePages()
			if err != nil {
				log.Error(err, "unmapping the executable's pages; no longer trying")
				code = false
			} else {
				q.codeBase = after
				sized(log, before-after).Info("quiet: the executable's pages unmapped", "residentBefore", before, "residentAfter", after, "took", time.Since(began))
			}
		}
		if releaseHeap {
			began := time.Now()
			debug.FreeOSMemory()
			after := heapLook(samples)
			sized(log, int64(l.heapGain)).Info("quiet: heap collected and its free pages returned", "expected", l.heapGain, "liveBefore", l.heapLive, "liveAfter", after.heapLive, "took", time.Since(began))
		}
	}
}

// sized is the logger for a release that gave back bytes: log, or its
// -v=1 level under loudBytes.
func sized(log logr.Logger, bytes int64) logr.Logger {
	if bytes < loudBytes {
		return log.V(1)
	}
	return log
}
