package resume

import (
	"context"
	"sync"
	"time"
)

// Reporter turns traffic into last-activity writes: Begin marks a request
// to a Sandbox, and Run writes, off the request path, at most one
// last-activity per Sandbox per interval. A Sandbox with a request in
// flight is reported at every interval with a lease: the time written is
// InFlightLease ahead of now, so idle suspend, which counts its timeout from
// that time, cannot suspend the Sandbox (and delete its Pod) while the
// request is open, however short its idle timeout and however late a write
// lands, as long as the next report (one interval later) is not later than
// the lease; the end of the last request is then written as it happened.
// The first request after a quiet interval is written at once, so the
// controller learns of renewed traffic as early as the interval allows.
type Reporter struct {
	// Write records that k saw traffic at the given time
	// (Writer.ReportActivity). Required.
	Write func(ctx context.Context, k Key, at time.Time) error
	// OnError, if set, hears of failed writes (the entry is kept and
	// written again at its next interval, unless the Sandbox is gone or the
	// traffic is retryFor intervals old: a write that always fails, such
	// as one the router may not make, is not made forever).
	OnError func(k Key, err error)
	// Gone reports an error meaning the Sandbox is no more (IsGone: not
	// found, deleted, replaced); its entry is dropped. Nil: never.
	Gone func(err error) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[Key]*entry
	wake    chan struct{}
}

// InFlightLease is how far ahead of the report the last-activity of a
// Sandbox with a request in flight is stamped, for a report interval:
// two intervals (the next report is due after one) and two seconds (a
// flush tick, and the rounding to whole seconds).
func InFlightLease(interval time.Duration) time.Duration { return 2*interval + 2*time.Second }

type entry struct {
	interval  time.Duration
	lastWrite time.Time // zero: never written
	seen      time.Time // latest traffic not yet written; zero: none
	inflight  int
	stamped   time.Time // the last time written
	// urgent: a request began that the time last written may not cover
	// until the next interval; it is written at once.
	urgent bool
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Begin records the start of a request to k, which reports activity at
// most every interval (positive), and returns the function that records
// its end.
func (r *Reporter) Begin(k Key, interval time.Duration) (end func()) {
	r.touch(k, interval, 1)
	var once sync.Once
	return func() { once.Do(func() { r.touch(k, interval, -1) }) }
}

// Touch records traffic to k without a request in flight.
func (r *Reporter) Touch(k Key, interval time.Duration) { r.touch(k, interval, 0) }

func (r *Reporter) touch(k Key, interval time.Duration, delta int) {
	if interval <= 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	if r.entries == nil {
		r.entries = map[Key]*entry{}
		r.wake = make(chan struct{}, 1)
	}
	e := r.entries[k]
	if e == nil {
		e = &entry{}
		r.entries[k] = e
	}
	e.interval, e.seen = interval, now
	if delta > 0 && e.inflight == 0 && e.stamped.Before(now.Add(-2*interval+2*time.Second)) {
		// The first request in flight, and the time last written (with an
		// idle timeout of at least three intervals) may run out before
		// the next interval's report lands.
		e.urgent = true
	}
	e.inflight = max(e.inflight+delta, 0)
	due := e.urgent || now.Sub(e.lastWrite) >= interval
	wake := r.wake
	r.mu.Unlock()
	if due {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// due takes the entries whose write is due, and forgets the ones long
// quiet.
func (r *Reporter) due(now time.Time) map[Key]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Key]time.Time{}
	for k, e := range r.entries {
		if e.inflight > 0 {
			e.seen = now
		}
		if !e.urgent && now.Sub(e.lastWrite) < e.interval {
			continue
		}
		if e.seen.IsZero() {
			if now.Sub(e.lastWrite) > 2*e.interval {
				delete(r.entries, k) // quiet: nothing more to say
			}
			continue
		}
		out[k] = e.seen
		if e.inflight > 0 {
			out[k] = now.Add(InFlightLease(e.interval))
		}
		e.lastWrite, e.seen, e.stamped, e.urgent = now, time.Time{}, out[k], false
	}
	return out
}

// retryFor is how many intervals after the traffic a failed write of it
// is tried again.
const retryFor = 10

// Pending is how many Sandboxes the reporter remembers (for tests and
// metrics).
func (r *Reporter) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// Flush writes what is due now and returns the number of writes made.
func (r *Reporter) Flush(ctx context.Context) int {
	n := 0
	for k, at := range r.due(r.now()) {
		n++
		if err := r.Write(ctx, k, at); err != nil {
			if r.Gone != nil && r.Gone(err) {
				r.mu.Lock()
				delete(r.entries, k)
				r.mu.Unlock()
				continue
			}
			if r.OnError != nil {
				r.OnError(k, err)
			}
			r.mu.Lock()
			if e := r.entries[k]; e != nil && e.seen.IsZero() && r.now().Sub(at) < retryFor*e.interval {
				e.seen = at // say it again next interval
			}
			r.mu.Unlock()
		}
	}
	return n
}

// Run flushes every tick, and at once when a Sandbox's first traffic
// after a quiet interval arrives, until ctx ends.
func (r *Reporter) Run(ctx context.Context, tick time.Duration) {
	r.mu.Lock()
	if r.entries == nil {
		r.entries = map[Key]*entry{}
		r.wake = make(chan struct{}, 1)
	}
	wake := r.wake
	r.mu.Unlock()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		r.Flush(ctx)
	}
}

// Interval is how often traffic to a Sandbox with the given idle timeout
// is reported: a third of the timeout (so a report, late by up to a flush
// tick and stamped in whole seconds, still lands before the controller's
// deadline), at most max, and never for a Sandbox without idle suspend
// (zero).
func Interval(idle, maxInterval time.Duration) time.Duration {
	if idle <= 0 {
		return 0
	}
	d := idle / 3
	if maxInterval > 0 && d > maxInterval {
		d = maxInterval
	}
	return max(d, 100*time.Millisecond)
}
