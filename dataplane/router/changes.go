package router

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// Changes tells requests that wait for the router's cache (a Sandbox not
// yet routable, a resume under way) that it changed, so that they look
// again at once instead of at the next poll: a client that saw its claim
// Ready a moment before the router's watch did waits for that watch event,
// not for resolvePoll. The zero value is ready to use; a nil *Changes
// never signals (waiters poll).
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel closed at the next change. Take it before looking
// at the cache: a change between the look and the wait is not missed.
func (c *Changes) Wait() <-chan struct{} {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Changed wakes every waiter.
func (c *Changes) Changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// handler is an informer event handler that calls Changed on every event.
func (c *Changes) handler() toolscache.ResourceEventHandler {
	changed := func(any) { c.Changed() }
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
}
