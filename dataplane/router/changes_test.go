package router

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// TestChanges: a waiter's channel closes at the next change, not before;
// one taken after the change waits for the one after; a nil *Changes never
// signals.
func TestChanges(t *testing.T) {
	var c Changes
	first := c.Wait()
	select {
	case <-first:
		t.Fatal("closed before any change")
	default:
	}
	if c.Wait() != first {
		t.Error("two waiters before a change got different channels")
	}
	c.Changed()
	select {
	case <-first:
	default:
		t.Fatal("not closed by the change")
	}
	next := c.Wait()
	select {
	case <-next:
		t.Fatal("a channel taken after the change is closed already")
	default:
	}
	c.Changed()
	c.Changed() // no waiter: nothing to close twice
	var none *Changes
	if none.Wait() != nil {
		t.Error("a nil *Changes gave a channel")
	}
}

// TestResolveLooksAgainOnChange: a request for a Sandbox the cache shows
// not yet routable looks again when the cache changes, not at the next
// poll (here an hour away, so the request would time out without it).
func TestResolveLooksAgainOnChange(t *testing.T) {
	defer func(p time.Duration) { resolvePoll = p }(resolvePoll)
	resolvePoll = time.Hour
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	changes := &Changes{}
	var ready atomic.Bool
	looked := make(chan struct{}, 8)
	r := newTestRouter(t, func(o *Options) {
		o.ResolveWait, o.Changes = time.Hour, changes
		o.Resolver = ResolverFunc(func(_ context.Context, t Target) (Endpoint, error) {
			looked <- struct{}{}
			if !ready.Load() {
				return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Detail: "not yet", Retry: true}
			}
			return Endpoint{Pod: "box", IP: netip.MustParseAddr("127.0.0.1"), Port: t.Port}, nil
		})
	})
	go func() {
		<-looked
		// A change that does not make it routable: it looks, and waits on.
		changes.Changed()
		<-looked
		ready.Store(true)
		changes.Changed()
	}()
	headers := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Port": port, "X-Sandbox-Timeout": "10"}
	if resp, body := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("%d %s; want the request served once the cache changed", resp.StatusCode, body)
	}
	if n := r.resolves.Load(); n != 3 {
		t.Errorf("%d looks; want 3 (not routable, a change that did not help, the change that did)", n)
	}
}

// TestRefusedCallerNeverWaitsOnChanges plays the attacker: a caller the
// authorizer refuses, asking for a Sandbox the cache shows not yet
// routable while the cache keeps changing, is answered 403 at once; the
// cache is never looked at for it, so the new wait cannot be used to learn
// when another tenant's Sandbox becomes routable.
func TestRefusedCallerNeverWaitsOnChanges(t *testing.T) {
	changes := &Changes{}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				changes.Changed()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	r := newTestRouter(t, func(o *Options) {
		o.ResolveWait, o.Changes = time.Hour, changes
		o.Authorizer = authorizerFunc(func(context.Context, *http.Request, string, string) *Error {
			return &Error{Status: http.StatusForbidden, Reason: "forbidden", Detail: "no exec on this sandbox"}
		})
		o.Resolver = ResolverFunc(func(context.Context, Target) (Endpoint, error) {
			return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Detail: "not yet", Retry: true}
		})
	})
	headers := map[string]string{"X-Sandbox-ID": "someone-elses", "X-Sandbox-Namespace": "team-b", "X-Sandbox-Port": "8888", "X-Sandbox-Timeout": "10"}
	if resp, _ := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refused caller got %d; want 403", resp.StatusCode)
	}
	if n := r.resolves.Load(); n != 0 {
		t.Errorf("the cache was looked at %d times for a refused caller; want 0", n)
	}
}
