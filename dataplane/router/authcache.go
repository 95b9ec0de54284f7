package router

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// reviewCache keeps the answers of reviews for a TTL each (an LRU of
// bounded size) and refreshes ahead: once a kept yes is in the last
// quarter of its TTL, the next lookup is told to ask again in the
// background while the kept answer still serves. A caller who keeps
// sending requests then never waits for a review after its first, and a
// right the API server withdraws still ends within the TTL: a background
// answer of no removes the yes. Requests that find nothing kept for the
// same question at the same time wait for one review (once): a burst of
// first requests costs one review, not one each.
type reviewCache struct {
	lru      *utilcache.LRUExpireCache
	clock    clock.PassiveClock
	inflight sync.Map // keys being asked again
	flight   singleflight.Group
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

// get returns what is kept for key. again is true for one caller at a
// time once a yes is in the last quarter of its TTL: that caller asks
// again in the background and then calls asked(key).
func (c *reviewCache) get(key string) (v any, again, ok bool) {
	raw, ok := c.lru.Get(key)
	if !ok {
		return nil, false, false
	}
	k := raw.(keptAnswer)
	if k.refresh && k.expires.Sub(c.clock.Now()) < k.ttl/4 {
		_, busy := c.inflight.LoadOrStore(key, struct{}{})
		again = !busy
	}
	return k.v, again, true
}

// asked ends a background ask that get started.
func (c *reviewCache) asked(key string) { c.inflight.Delete(key) }

// once runs ask for key; callers with the same key meanwhile wait for its
// answer instead of sending a review of their own.
func (c *reviewCache) once(key string, ask func() (any, *Error)) (any, *Error) {
	type answer struct {
		v   any
		err *Error
	}
	r, _, _ := c.flight.Do(key, func() (any, error) {
		v, err := ask()
		return answer{v, err}, nil
	})
	a := r.(answer)
	return a.v, a.err
}
