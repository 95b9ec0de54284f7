package ssa

import (
	"context"
	"sync"
)

// creating lets one write at a time create an object the cache does not
// show yet. Many workers may plan the same create at once (every Sandbox
// of a new namespace plans the namespace's default-deny NetworkPolicy
// until the cache shows it); the first writes it, the others wait for that
// write and then find it recently created (Engine.recentlyCreated), so
// they send nothing.
type creating struct {
	mu      sync.Mutex
	writing map[writeKey]chan struct{}
}

// await returns once no other create of k is being written, with release,
// which the caller calls when its own write is done; or the context's
// error, having waited for nothing.
func (c *creating) await(ctx context.Context, k writeKey) (release func(), err error) {
	for {
		c.mu.Lock()
		done, busy := c.writing[k]
		if !busy {
			if c.writing == nil {
				c.writing = map[writeKey]chan struct{}{}
			}
			done = make(chan struct{})
			c.writing[k] = done
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.writing, k)
				c.mu.Unlock()
				close(done)
			}, nil
		}
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
