package resume

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Group runs one resume per Sandbox however many requests ask for it at
// once: the first caller starts it, later callers wait for the same result.
// The resume runs on a context of its own, bounded by Timeout, so a caller
// that gives up (its request cancelled) stops only its own wait.
type Group struct {
	// Timeout bounds one resume (the write and the wait for Ready).
	Timeout time.Duration
	g       singleflight.Group
}

// Do runs fn for key unless a call for key is in flight, in which case it
// waits for that call. started reports whether this caller ran fn (false:
// it waited for another's).
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) error) (started bool, err error) {
	var ran atomic.Bool // set by fn's goroutine, read by this one
	ch := g.g.DoChan(key, func() (any, error) {
		ran.Store(true)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout())
		defer cancel()
		return nil, fn(rctx)
	})
	select {
	case res := <-ch:
		return ran.Load(), res.Err
	case <-ctx.Done():
		return ran.Load(), ctx.Err()
	}
}

func (g *Group) timeout() time.Duration {
	if g.Timeout > 0 {
		return g.Timeout
	}
	return DefaultTimeout
}

// DefaultTimeout bounds a resume when Group.Timeout is not set.
const DefaultTimeout = 2 * time.Minute
