package eventgate

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// Gate holds Events while the controller writes. The zero value holds
// nothing; New sets the defaults.
type Gate struct {
	// Quiet is how long after the controller's last write ends an Event
	// is sent; 0 sends it as soon as no write is in flight.
	Quiet time.Duration
	// MaxHold bounds how long one Event waits; 0 sends every Event at once.
	MaxHold time.Duration
	// MaxHeld bounds how many Events wait at once: more go at once, so a
	// flood of Events never piles up in memory.
	MaxHeld int64
	// Senders is how many held Events are written at once when the gate
	// opens, so that a burst's Events drain instead of landing together.
	Senders int

	inflight atomic.Int64
	lastEnd  atomic.Int64 // UnixNano when the last tracked write ended
	busy     atomic.Pointer[func() bool]
	held     atomic.Int64
	init     sync.Once
	mu       sync.Mutex
	quietCh  chan struct{} // closed by watch once quiet; nil when none looks
	slots    chan struct{}
	closed   chan struct{}
	close    sync.Once
}

// DefaultQuiet is New's Quiet.
const DefaultQuiet = 20 * time.Millisecond

// New returns a Gate that holds an Event at most maxHold, until no write
// has been in flight for DefaultQuiet; 0 holds nothing.
func New(maxHold time.Duration) *Gate {
	return &Gate{Quiet: DefaultQuiet, MaxHold: maxHold, MaxHeld: 1000, Senders: 2}
}

func (g *Gate) setup() {
	g.init.Do(func() {
		g.slots = make(chan struct{}, max(g.Senders, 1))
		g.closed = make(chan struct{})
	})
}

// Close stops holding: Events waiting now, and every one after, are sent
// at once. Call it before the broadcaster's Shutdown, which waits for them.
func (g *Gate) Close() {
	g.setup()
	g.close.Do(func() { close(g.closed) })
}

// Track wraps a transport so that the Gate sees the writes made through it.
func (g *Gate) Track(next http.RoundTripper) http.RoundTripper {
	return tracker{g: g, next: next}
}

type tracker struct {
	g    *Gate
	next http.RoundTripper
}

func (t tracker) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isWrite(req) {
		return t.next.RoundTrip(req)
	}
	t.g.inflight.Add(1)
	defer func() {
		t.g.lastEnd.Store(time.Now().UnixNano())
		t.g.inflight.Add(-1)
	}()
	return t.next.RoundTrip(req)
}

// isWrite says whether a request is one of the writes Events yield to: it
// changes something, and not an Event (core or events.k8s.io).
func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	return !isEventPath(req.URL.Path)
}

// isEventPath matches /apis/events.k8s.io/... and the core group's
// /api/v1/namespaces/<ns>/events[/<name>], and nothing named "events" of
// another resource.
func isEventPath(path string) bool {
	if strings.HasPrefix(path, "/apis/events.k8s.io/") {
		return true
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	return len(segs) >= 5 && segs[0] == "api" && segs[2] == "namespaces" && segs[4] == "events"
}

// HoldWhile makes Events also wait while busy reports true: work the
// controller has begun but sends no write for yet (a claim it is about to
// serve). MaxHold still bounds each Event's wait. busy is called often
// and must be cheap.
func (g *Gate) HoldWhile(busy func() bool) {
	g.busy.Store(&busy)
}

// busyFor is how long from now the controller stays busy if it writes
// nothing more: Quiet (at least a millisecond, the poll) while a write is
// in flight or HoldWhile's function says busy, what is left of Quiet
// after the last write ended, or zero.
func (g *Gate) busyFor(now time.Time) time.Duration {
	if busy := g.busy.Load(); g.inflight.Load() > 0 || busy != nil && (*busy)() {
		return max(g.Quiet, time.Millisecond)
	}
	return time.Unix(0, g.lastEnd.Load()).Add(g.Quiet).Sub(now)
}

// wait blocks until an Event may be sent and returns the function that
// ends its sending.
func (g *Gate) wait(ctx context.Context) (done func()) {
	g.setup()
	noop := func() {}
	if g.MaxHold <= 0 {
		return noop
	}
	if g.held.Add(1) > g.MaxHeld {
		g.held.Add(-1)
		return noop
	}
	defer g.held.Add(-1)
	deadline := time.NewTimer(g.MaxHold)
	defer deadline.Stop()
	expired := false
	for {
		if expired || g.busyFor(time.Now()) <= 0 {
			select {
			case g.slots <- struct{}{}:
			case <-ctx.Done():
				return noop
			case <-g.closed:
				return noop
			}
			// A write may have begun while this one waited for a slot.
			if !expired && g.busyFor(time.Now()) > 0 {
				<-g.slots
				continue
			}
			return func() { <-g.slots }
		}
		select {
		case <-g.quiet():
		case <-deadline.C:
			expired = true
		case <-ctx.Done():
			return noop
		case <-g.closed:
			return noop
		}
	}
}

// quiet returns a channel closed once the controller is next found quiet
// (busyFor zero). One goroutine looks for every held Event, so a burst's
// hundred held Events do not each poll.
func (g *Gate) quiet() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.quietCh == nil {
		g.quietCh = make(chan struct{})
		go g.watch(g.quietCh)
	}
	return g.quietCh
}

// watch closes ch once the controller is quiet, or the Gate closes.
func (g *Gate) watch(ch chan struct{}) {
	defer func() {
		g.mu.Lock()
		g.quietCh = nil
		g.mu.Unlock()
		close(ch)
	}()
	for {
		busy := g.busyFor(time.Now())
		if busy <= 0 {
			return
		}
		timer := time.NewTimer(busy)
		select {
		case <-timer.C:
		case <-g.closed:
			timer.Stop()
			return
		}
	}
}

// Sink wraps the sink an events broadcaster writes through so that each
// write waits for the Gate.
func (g *Gate) Sink(next events.EventSink) events.EventSink {
	return sink{g: g, next: next}
}

type sink struct {
	g    *Gate
	next events.EventSink
}

func (s sink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.g.wait(ctx)()
	return s.next.Create(ctx, ev)
}

func (s sink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.g.wait(ctx)()
	return s.next.Update(ctx, ev)
}

func (s sink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.g.wait(ctx)()
	return s.next.Patch(ctx, old, data)
}
