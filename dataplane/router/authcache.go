package router

import (
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// reviewCache keeps the answers of reviews for a TTL each (an LRU of
// bounded size) and asks for them: callers asking the same question at
// the same time wait for one review (a burst of first requests costs one
// review, not one each), and a kept yes still in use in the last quarter
// of its TTL is served while it is asked again in the background, once. A
// caller who keeps sending requests then never waits for a review after
// its first, and a right the API server withdraws still ends within the
// TTL: the background answer of no removes the yes.
type reviewCache struct {
	lru    *utilcache.LRUExpireCache
	clock  clock.PassiveClock
	flight singleflight.Group
}

type keptAnswer struct {
	v       any
	ttl     time.Duration
	expires time.Time
	refresh bool // a yes, asked again ahead of its end
}

func newReviewCache(size int, c clock.Clock) *reviewCache {
	return &reviewCache{lru: utilcache.NewLRUExpireCacheWithClock(size, c), clock: c}
}

// add keeps v for ttl; refresh marks a yes, to be asked again ahead.
func (c *reviewCache) add(key string, v any, ttl time.Duration, refresh bool) {
	c.lru.Add(key, keptAnswer{v: v, ttl: ttl, expires: c.clock.Now().Add(ttl), refresh: refresh}, ttl)
}

// remove forgets key (a yes the API server no longer gives).
func (c *reviewCache) remove(key string) { c.lru.Remove(key) }

// answer returns what is kept for key, else what ask returns; ask keeps
// its answer itself (add, remove). It must not depend on its caller's
// cancellation: callers share it, and a refresh outlives its caller.
func (c *reviewCache) answer(key string, ask func() (any, *Error)) (any, *Error) {
	type answer struct {
		v   any
		err *Error
	}
	shared := func() (any, error) {
		v, err := ask()
		return answer{v, err}, nil
	}
	if raw, ok := c.lru.Get(key); ok {
		k := raw.(keptAnswer)
		if k.refresh && k.expires.Sub(c.clock.Now()) < k.ttl/4 {
			c.flight.DoChan(key, shared) // asked once however many callers see it; nobody waits
		}
		return k.v, nil
	}
	r, _, _ := c.flight.Do(key, shared)
	a := r.(answer)
	return a.v, a.err
}
