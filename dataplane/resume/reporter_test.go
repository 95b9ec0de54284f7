package resume

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeWrites is a Reporter's Write that records what it is asked, and a
// clock the test moves.
type fakeWrites struct {
	mu     sync.Mutex
	now    time.Time
	writes []time.Time
	err    error
	ch     chan time.Time // if set, hears of every write
}

func newFake() *fakeWrites { return &fakeWrites{now: time.Unix(1_800_000_000, 0)} }

func (f *fakeWrites) reporter() *Reporter {
	return &Reporter{
		Write: func(_ context.Context, _ Key, at time.Time) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.writes = append(f.writes, at)
			if f.ch != nil {
				f.ch <- at
			}
			return f.err
		},
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now },
	}
}

func (f *fakeWrites) advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return f.now
}

var key = Key{Namespace: "team", Name: "box", UID: "uid-box"}

func TestReporterOneWritePerInterval(t *testing.T) {
	f := newFake()
	r := f.reporter()
	ctx := context.Background()
	for range 100 {
		r.Touch(key, time.Minute)
	}
	if n := r.Flush(ctx); n != 1 {
		t.Fatalf("first traffic: %d writes, want 1", n)
	}
	var last time.Time
	for range 5 { // touched every 10s, for 50s
		last = f.advance(10 * time.Second)
		for range 100 {
			r.Touch(key, time.Minute)
		}
		if n := r.Flush(ctx); n != 0 {
			t.Fatalf("within the interval: %d writes", n)
		}
	}
	f.advance(10 * time.Second)
	if n := r.Flush(ctx); n != 1 || !f.writes[1].Equal(last) {
		t.Errorf("after the interval: %d writes (%v), want one of the latest traffic %v", n, f.writes, last)
	}
	f.advance(time.Minute)
	if n := r.Flush(ctx); n != 0 {
		t.Errorf("an interval without traffic: %d writes", n)
	}
	f.advance(2 * time.Minute)
	r.Flush(ctx)
	if r.Pending() != 0 {
		t.Error("a quiet Sandbox is remembered")
	}
	// Other Sandboxes have their own intervals.
	r.Touch(key, time.Minute)
	r.Touch(Key{Namespace: "team", Name: "other", UID: "uid-other"}, time.Minute)
	r.Touch(Key{Namespace: "team", Name: "off"}, 0) // no idle suspend: never
	if n := r.Flush(ctx); n != 2 || r.Pending() != 2 {
		t.Errorf("two Sandboxes: %d writes, %d pending", n, r.Pending())
	}
}

func TestReporterInflight(t *testing.T) {
	f := newFake()
	r := f.reporter()
	ctx := context.Background()
	end := r.Begin(key, time.Minute)
	began := f.advance(0)
	if n := r.Flush(ctx); n != 1 || !f.writes[0].Equal(began.Add(InFlightLease(time.Minute))) {
		t.Fatalf("a request begins: %d writes (%v), want one leased ahead", n, f.writes)
	}
	// While it is open, each interval's report is stamped a lease ahead
	// (2 intervals and 2s), so the deadline idle suspend counts from it is
	// never reached before the next report, even with a timeout of 3
	// intervals and a report late by one.
	for i := range 3 {
		now := f.advance(time.Minute)
		if n := r.Flush(ctx); n != 1 || !f.writes[len(f.writes)-1].Equal(now.Add(2*time.Minute+2*time.Second)) {
			t.Fatalf("interval %d of a long request: %d writes (%v), want one at %v + lease", i, n, f.writes, now)
		}
	}
	endedAt := f.advance(30 * time.Second)
	end()
	end() // twice: counted once
	f.advance(30 * time.Second)
	if n := r.Flush(ctx); n != 1 || !f.writes[len(f.writes)-1].Equal(endedAt) {
		t.Errorf("the interval the request ended in: %d writes (%v), want one at %v", n, f.writes, endedAt)
	}
	f.advance(time.Minute)
	if n := r.Flush(ctx); n != 0 {
		t.Errorf("after the request: %d writes (end not counted once?)", n)
	}
}

// TestReporterFirstTouchAfterQuiet: Run writes the first traffic after a
// quiet interval at once, not at its next tick.
func TestReporterFirstTouchAfterQuiet(t *testing.T) {
	f := newFake()
	f.ch = make(chan time.Time, 10)
	r := f.reporter()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-f.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no write", what)
		}
	}
	r.Touch(key, time.Minute)
	wait("first traffic")
	f.advance(10 * time.Second)
	r.Touch(key, time.Minute)
	select {
	case at := <-f.ch:
		t.Fatalf("traffic within the interval written at once (%v)", at)
	case <-time.After(100 * time.Millisecond):
	}
	f.advance(5 * time.Minute)
	r.Touch(key, time.Minute)
	wait("traffic after a quiet interval")
}

func TestReporterErrors(t *testing.T) {
	f := newFake()
	errGone, errOther := errors.New("gone"), errors.New("refused")
	f.err = errGone
	r := f.reporter()
	var heard []error
	r.Gone = func(err error) bool { return errors.Is(err, errGone) }
	r.OnError = func(_ Key, err error) { heard = append(heard, err) }
	ctx := context.Background()
	end := r.Begin(key, time.Minute)
	if n := r.Flush(ctx); n != 1 || r.Pending() != 0 || len(heard) != 0 {
		t.Fatalf("gone: %d writes, %d pending, %v", n, r.Pending(), heard)
	}
	end() // the end of a request to a Sandbox gone: harmless

	f.err = errOther
	at := f.now
	r.Touch(key, time.Minute)
	r.Flush(ctx)
	f.advance(time.Minute)
	if n := r.Flush(ctx); n != 1 || !f.writes[len(f.writes)-1].Equal(at) || len(heard) != 2 {
		t.Fatalf("a failed write is made again the next interval: %d writes (%v), heard %v", n, f.writes, heard)
	}
	for range retryFor {
		f.advance(time.Minute)
		r.Flush(ctx)
	}
	before := len(f.writes)
	for range 5 {
		f.advance(time.Minute)
		r.Flush(ctx)
	}
	if len(f.writes) != before || r.Pending() != 0 {
		t.Errorf("a write that always fails: %d more writes, %d pending; want given up and forgotten", len(f.writes)-before, r.Pending())
	}
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct{ idle, max, want time.Duration }{
		{0, time.Minute, 0},
		{time.Hour, 30 * time.Second, 30 * time.Second},
		{time.Minute, 0, 20 * time.Second},
		{45 * time.Second, 30 * time.Second, 15 * time.Second},
		{time.Second, time.Minute, time.Second / 3},
		{100 * time.Millisecond, time.Minute, 100 * time.Millisecond},
	} {
		if got := Interval(tc.idle, tc.max); got != tc.want {
			t.Errorf("Interval(%s, %s) = %s, want %s", tc.idle, tc.max, got, tc.want)
		}
	}
}

// TestReporterFirstRequestIsUrgent: a request that begins while the time
// last written could run out before the next interval's report (its end
// was written, a short idle timeout) is written at once, not at the next
// interval; one that begins under a lease still running is not.
func TestReporterFirstRequestIsUrgent(t *testing.T) {
	f := newFake()
	r := f.reporter()
	ctx := context.Background()
	interval := time.Second // an idle timeout of 3s
	end := r.Begin(key, interval)
	r.Flush(ctx)
	f.advance(interval)
	end()
	f.advance(interval)
	if n := r.Flush(ctx); n != 1 {
		t.Fatalf("the end of the request: %d writes", n)
	}
	f.advance(100 * time.Millisecond) // within the interval of the last write
	end = r.Begin(key, interval)
	if n := r.Flush(ctx); n != 1 || !f.writes[len(f.writes)-1].After(f.advance(0)) {
		t.Fatalf("a request begins after the end was written: %d writes (%v), want a lease at once", n, f.writes)
	}
	// A second request under the lease needs no write of its own.
	f.advance(100 * time.Millisecond)
	end2 := r.Begin(key, interval)
	if n := r.Flush(ctx); n != 0 {
		t.Errorf("a second request under a running lease: %d writes", n)
	}
	end()
	end2()
}
