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
// with 500 Sandboxes, 52 MiB of the executable resident of 94 MiB in all,
// of which 30 MiB came back once unmapped. They are clean copies of the
// file, so unmapping them loses nothing: the page cache keeps them, and
// what runs again is mapped again by a minor fault.
const (
	// codeLookEvery is how often allocation is looked at (reading the
	// runtime's metrics costs microseconds).
	codeLookEvery = 2 * time.Second
	// codeQuietBytes is the most a quiet controller allocates in
	// codeLookEvery (an idle one allocates well under 1 MiB a second).
	codeQuietBytes = 4 << 20
	// codeBusyBytes is how much must have been allocated since the last
	// release (or since the process started) for another: a busy spell.
	codeBusyBytes = 64 << 20
)

// spells tells, from the runtime's cumulative allocation, when a busy
// spell has ended: at the first quiet look after codeBusyBytes were
// allocated since the last release. Starting is the first spell.
type spells struct {
	last, since uint64
	started     bool
}

// decide is given the cumulative bytes allocated; it reports whether to
// release now.
func (s *spells) decide(allocated uint64) bool {
	if !s.started {
		s.started, s.last = true, allocated
		return false
	}
	quiet := allocated-s.last < codeQuietBytes
	s.last = allocated
	if !quiet || allocated-s.since < codeBusyBytes {
		return false
	}
	s.since = allocated
	return true
}

// releaseCodePages unmaps the executable's read-only pages at the end of
// each busy spell until ctx ends.
func releaseCodePages(ctx context.Context, log logr.Logger) {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	var s spells
	tick := time.NewTicker(codeLookEvery)
	defer tick.Stop()
	for {
		metrics.Read(samples)
		if s.decide(samples[0].Value.Uint64()) {
			began := time.Now()
			before, after, err := releaseExecutablePages()
			if err != nil {
				log.Error(err, "unmapping the executable's pages")
				return
			}
			log.Info("quiet after a busy spell: the executable's pages unmapped", "residentBefore", before, "residentAfter", after, "took", time.Since(began))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
