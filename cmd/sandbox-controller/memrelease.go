package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// Releasing memory once the controller goes quiet (--release-idle-memory).
//
// After a wave (thousands of Sandboxes created, suspended or resumed) the Go
// heap holds the wave's garbage headroom: the collector's goal was set from
// what was live while the wave ran, and the runtime hands free pages back to
// the kernel only slowly. Measured at N=5000 after the cold create and 10 s
// idle: 78 MiB live, 162 MiB anonymous resident. Once the controller has
// been quiet for a while, one collection that returns every free page
// (debug.FreeOSMemory) brings resident memory down to what is live.
const (
	// releaseEvery is how often allocation is looked at.
	releaseEvery = 5 * time.Second
	// quietBytes is the most a quiet controller allocates in releaseEvery
	// (an idle one allocates a few hundred KiB: metrics scrapes, resyncs).
	quietBytes = 8 << 20
	// busyBytes is how much must have been allocated since the last
	// release (or start) for another to be worth a collection.
	busyBytes = 256 << 20
	// freeBytes is the least the heap must hold free and not yet returned
	// to the kernel.
	freeBytes = 16 << 20
)

// releaser decides, from the runtime's cumulative allocation and its free
// heap, when to release memory: after a busy spell, at the first quiet
// interval, while enough is free to be worth it.
type releaser struct {
	last, since uint64 // allocated bytes at the last look, at the last release
	started     bool
}

// decide is given the cumulative bytes allocated and the free heap bytes
// not yet returned; it reports whether to release now.
func (r *releaser) decide(allocated, free uint64) bool {
	if !r.started {
		r.started, r.last, r.since = true, allocated, allocated
		return false
	}
	quiet := allocated-r.last < quietBytes
	r.last = allocated
	if !quiet || allocated-r.since < busyBytes || free < freeBytes {
		return false
	}
	r.since = allocated
	return true
}

// releaseIdleMemory releases memory as releaser decides until ctx ends.
func releaseIdleMemory(ctx context.Context, log logr.Logger) {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	var r releaser
	tick := time.NewTicker(releaseEvery)
	defer tick.Stop()
	for {
		metrics.Read(samples)
		if r.decide(samples[0].Value.Uint64(), samples[1].Value.Uint64()) {
			began := time.Now()
			debug.FreeOSMemory()
			log.V(1).Info("quiet: free memory returned", "freeBytes", samples[1].Value.Uint64(), "took", time.Since(began))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
