package eventgate

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
)

// recorded is an events.EventSink that notes when each Event reached it.
type recorded struct {
	mu  sync.Mutex
	got map[string]time.Time
}

func (r *recorded) note(ev *eventsv1.Event) (*eventsv1.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]time.Time{}
	}
	r.got[ev.Name] = time.Now()
	return ev, nil
}

func (r *recorded) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return r.note(ev)
}
func (r *recorded) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return r.note(ev)
}
func (r *recorded) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return r.note(ev)
}

func (r *recorded) at(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.got[name]
	return at, ok
}

// server answers every request once release is closed.
func server(t *testing.T, release <-chan struct{}) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

// send records an Event named name through the gate's sink in the
// background, as the broadcaster does (one goroutine per Event).
func send(g *Gate, to *recorded, name string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ev := &eventsv1.Event{}
		ev.Name = name
		_, _ = g.Sink(to).Create(context.Background(), ev)
	}()
	return done
}

func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not sent within 10 s", what)
	}
}

// An Event waits while a write is in flight and goes once it has ended,
// also with no quiet spell after it.
func TestEventWaitsForWriteInFlight(t *testing.T) {
	for _, quiet := range []time.Duration{20 * time.Millisecond, 0} {
		t.Run(quiet.String(), func(t *testing.T) { waitsForWriteInFlight(t, quiet) })
	}
}

func waitsForWriteInFlight(t *testing.T, quiet time.Duration) {
	release := make(chan struct{})
	s := server(t, release)
	var releaseOnce sync.Once
	answer := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the server closes, should the test fail first
	g := New(time.Minute)
	g.Quiet = quiet
	client := &http.Client{Transport: g.Track(http.DefaultTransport)}

	wrote := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPatch, s.URL+"/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/events", strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		wrote <- err
	}()
	for g.inflight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	to := &recorded{}
	done := send(g, to, "adopted")
	time.Sleep(200 * time.Millisecond)
	if _, sent := to.at("adopted"); sent {
		t.Fatal("the Event was sent while the controller's write was in flight")
	}
	ended := time.Now()
	answer()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, "the held Event")
	if at, _ := to.at("adopted"); at.Before(ended) {
		t.Fatalf("sent at %s, before the write ended at %s", at, ended)
	}
}

// Reads, watches and Events' own writes do not hold Events.
func TestOnlyWritesHold(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		write        bool
	}{
		{http.MethodPatch, "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/s", true},
		{http.MethodPost, "/api/v1/namespaces/a/pods", true},
		{http.MethodDelete, "/api/v1/namespaces/a/pods/p", true},
		{http.MethodPut, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/a/sandboxclaims/c/status", true},
		{http.MethodPost, "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/events", true},
		{http.MethodGet, "/api/v1/namespaces/a/pods", false},
		{http.MethodGet, "/api/v1/pods?watch=true", false},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/a/events", false},
		{http.MethodPatch, "/apis/events.k8s.io/v1/namespaces/a/events/e", false},
		{http.MethodPost, "/api/v1/namespaces/a/events", false},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if got := isWrite(req); got != tc.write {
			t.Errorf("%s %s: isWrite %v, want %v", tc.method, tc.path, got, tc.write)
		}
	}
}

// Under writes that never stop, an Event waits MaxHold and no longer.
func TestEventWaitsAtMostMaxHold(t *testing.T) {
	g := New(150 * time.Millisecond)
	g.inflight.Add(1) // a write that never ends
	to := &recorded{}
	began := time.Now()
	waitDone(t, send(g, to, "e"), "the Event under constant writes")
	if took := time.Since(began); took < 150*time.Millisecond {
		t.Fatalf("sent after %s, before MaxHold", took)
	}
}

// With nothing written, an Event goes at once; Close releases held ones;
// past MaxHeld, Events are not held.
func TestEventNotHeld(t *testing.T) {
	g := New(time.Hour)
	to := &recorded{}
	waitDone(t, send(g, to, "quiet"), "an Event with no write")

	g.inflight.Add(1)
	held := send(g, to, "held")
	time.Sleep(50 * time.Millisecond)
	if _, sent := to.at("held"); sent {
		t.Fatal("sent while a write was in flight")
	}
	g.Close()
	waitDone(t, held, "a held Event after Close")
	waitDone(t, send(g, to, "after close"), "an Event after Close")

	bounded := New(time.Hour)
	bounded.MaxHeld = 1
	bounded.inflight.Add(1)
	first := send(bounded, to, "first")
	for bounded.held.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	waitDone(t, send(bounded, to, "over the bound"), "an Event beyond MaxHeld")
	if _, sent := to.at("first"); sent {
		t.Fatal("the first Event was not held")
	}
	bounded.Close()
	waitDone(t, first, "the first Event after Close")

	off := New(0)
	off.inflight.Add(1)
	waitDone(t, send(off, to, "off"), "an Event with holding off")
}

// An Event waits while HoldWhile's function says busy (a claim about to
// be served, no write sent yet), and goes once it says not, also with no
// quiet spell; MaxHold still bounds the wait.
func TestEventWaitsWhileBusy(t *testing.T) {
	for _, quiet := range []time.Duration{20 * time.Millisecond, 0} {
		g := New(time.Minute)
		g.Quiet = quiet
		var busy atomic.Bool
		busy.Store(true)
		g.HoldWhile(busy.Load)
		to := &recorded{}
		done := send(g, to, "adopted")
		time.Sleep(150 * time.Millisecond)
		if _, sent := to.at("adopted"); sent {
			t.Fatalf("quiet %s: the Event was sent while the controller said it was busy", quiet)
		}
		freed := time.Now()
		busy.Store(false)
		waitDone(t, done, "the held Event")
		if at, _ := to.at("adopted"); at.Before(freed) {
			t.Fatalf("quiet %s: sent at %s, before the controller was free at %s", quiet, at, freed)
		}
	}
	bounded := New(100 * time.Millisecond)
	bounded.HoldWhile(func() bool { return true })
	began := time.Now()
	waitDone(t, send(bounded, &recorded{}, "bounded"), "an Event held by a busy controller")
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Fatalf("sent after %s, before MaxHold", took)
	}
}

// Many held Events share one look at the controller: all of them wait
// while it is busy, and all go once it is quiet, two at a time.
func TestManyHeldEventsGoTogether(t *testing.T) {
	g := New(time.Minute)
	var busy atomic.Bool
	busy.Store(true)
	g.HoldWhile(busy.Load)
	to := &recorded{}
	var done []<-chan struct{}
	for i := range 100 {
		done = append(done, send(g, to, fmt.Sprint("held-", i)))
	}
	time.Sleep(100 * time.Millisecond)
	to.mu.Lock()
	early := len(to.got)
	to.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d Events sent while the controller was busy", early)
	}
	busy.Store(false)
	for i, d := range done {
		waitDone(t, d, fmt.Sprint("held-", i))
	}
	if g.held.Load() != 0 {
		t.Fatalf("%d Events still counted as held", g.held.Load())
	}
}
