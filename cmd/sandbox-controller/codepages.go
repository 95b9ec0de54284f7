package main

import (
	"context"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// Unmapping the executable's pages once quiet (--release-code-pages).
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
const (
	// codeLookEvery is how often allocation and the executable's resident
	// pages are looked at (reading both costs tens of microseconds).
	codeLookEvery = 2 * time.Second
	// codeQuietBytes is the most a quiet controller allocates in
	// codeLookEvery (an idle one allocates well under 1 MiB a second).
	codeQuietBytes = 4 << 20
	// codeGrownBytes is how far the file-backed resident pages must have
	// grown since the last release (or from none, at start) for another.
	codeGrownBytes = 16 << 20
)

// codeReleaser tells when to unmap the executable's pages: at a quiet
// look (little allocated since the last) once the file-backed resident
// pages have grown by codeGrownBytes since they were last unmapped.
type codeReleaser struct {
	last    uint64 // bytes allocated at the last look
	base    int64  // file-backed resident bytes after the last release
	started bool
}

// decide is given the cumulative bytes allocated and the file-backed
// resident bytes; it reports whether to release now.
func (c *codeReleaser) decide(allocated uint64, resident int64) bool {
	if !c.started {
		c.started, c.last = true, allocated
		return false
	}
	quiet := allocated-c.last < codeQuietBytes
	c.last = allocated
	return quiet && resident-c.base >= codeGrownBytes
}

// releaseCodePages unmaps the executable's read-only pages as
// codeReleaser decides until ctx ends.
func releaseCodePages(ctx context.Context, log logr.Logger) {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	var c codeReleaser
	tick := time.NewTicker(codeLookEvery)
	defer tick.Stop()
	for {
		metrics.Read(samples)
		if c.decide(samples[0].Value.Uint64(), rssFile()) {
			began := time.Now()
			before, after, err := releaseExecutablePages()
			if err != nil {
				log.Error(err, "unmapping the executable's pages")
				return
			}
			c.base = after
			log.Info("quiet: the executable's pages unmapped", "residentBefore", before, "residentAfter", after, "took", time.Since(began))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
