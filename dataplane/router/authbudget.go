package router

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// ReviewBudgetOptions configure NewReviewBudget.
type ReviewBudgetOptions struct {
	// NewTokenQPS and NewTokenBurst bound the TokenReviews of tokens the
	// router has not seen authenticated (in the last KnownFor), all
	// callers together; defaults 20 and twice the QPS.
	NewTokenQPS   float64
	NewTokenBurst int
	// SourceQPS and SourceBurst bound them per client address (the
	// connection's peer); defaults a quarter of the shared ones (burst at
	// least 1).
	SourceQPS   float64
	SourceBurst int
	// KnownQPS and KnownBurst bound the TokenReviews of tokens seen
	// authenticated, and the SubjectAccessReviews (asked only for
	// authenticated users); defaults 100 and twice the QPS.
	KnownQPS   float64
	KnownBurst int
	// KnownFor is how long a token that authenticated counts as known;
	// default one hour.
	KnownFor time.Duration
	// Size bounds the known tokens and the client addresses remembered;
	// default 16384.
	Size int
}

// ReviewBudget bounds the reviews the router asks the API server for, so
// that a flood of made-up tokens cannot starve callers with real ones:
//
//   - a TokenReview of a token the router has not seen authenticated takes
//     from its client address's share, then from the budget of new tokens
//     shared by all; either empty, the request is refused 429 at once (it
//     never queues behind the flood);
//   - a TokenReview of a token seen authenticated (its cached answer
//     expired) and every SubjectAccessReview take from a budget of their
//     own, which made-up tokens never reach, and wait for it (up to the
//     review's timeout).
//
// A nil *ReviewBudget bounds nothing.
type ReviewBudget struct {
	o              ReviewBudgetOptions
	fresh, known   *rate.Limiter
	seen           *utilcache.LRUExpireCache // token hash -> struct{}
	mu             sync.Mutex
	sources        *utilcache.LRUExpireCache // client address -> *rate.Limiter
	sourceIdleTime time.Duration
}

// NewReviewBudget returns a ReviewBudget.
func NewReviewBudget(o ReviewBudgetOptions) *ReviewBudget {
	if o.NewTokenQPS <= 0 {
		o.NewTokenQPS = 20
	}
	if o.NewTokenBurst <= 0 {
		o.NewTokenBurst = int(2 * o.NewTokenQPS)
	}
	if o.SourceQPS <= 0 {
		o.SourceQPS = o.NewTokenQPS / 4
	}
	if o.SourceBurst <= 0 {
		o.SourceBurst = max(1, o.NewTokenBurst/4)
	}
	if o.KnownQPS <= 0 {
		o.KnownQPS = 100
	}
	if o.KnownBurst <= 0 {
		o.KnownBurst = int(2 * o.KnownQPS)
	}
	if o.KnownFor <= 0 {
		o.KnownFor = time.Hour
	}
	if o.Size <= 0 {
		o.Size = 16384
	}
	return &ReviewBudget{
		o:     o,
		fresh: rate.NewLimiter(rate.Limit(o.NewTokenQPS), o.NewTokenBurst),
		known: rate.NewLimiter(rate.Limit(o.KnownQPS), o.KnownBurst),
		seen:  utilcache.NewLRUExpireCache(o.Size), sources: utilcache.NewLRUExpireCache(o.Size),
		// A source's bucket refills within Burst/QPS; one idle longer
		// than that is full again, so it can be forgotten.
		sourceIdleTime: max(time.Minute, time.Duration(float64(o.SourceBurst)/o.SourceQPS*float64(time.Second))),
	}
}

// errThrottled is the refusal of a request beyond the review budget.
var errThrottled = &Error{Status: http.StatusTooManyRequests, Reason: ReasonThrottled,
	Detail: "Too many requests with tokens the router has not reviewed yet; try again in a moment."}

// tokenReview takes the budget of a TokenReview of the token with hash key
// from client address source, or returns the refusal.
func (b *ReviewBudget) tokenReview(ctx context.Context, key, source string) *Error {
	if b == nil {
		return nil
	}
	if _, ok := b.seen.Get(key); ok {
		return b.wait(ctx)
	}
	if !b.source(source).Allow() || !b.fresh.Allow() {
		return errThrottled
	}
	return nil
}

// accessReview takes the budget of a SubjectAccessReview.
func (b *ReviewBudget) accessReview(ctx context.Context) *Error {
	if b == nil {
		return nil
	}
	return b.wait(ctx)
}

func (b *ReviewBudget) wait(ctx context.Context) *Error {
	if err := b.known.Wait(ctx); err != nil {
		return errThrottled
	}
	return nil
}

func (b *ReviewBudget) source(addr string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.sources.Get(addr); ok {
		return v.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Limit(b.o.SourceQPS), b.o.SourceBurst)
	b.sources.Add(addr, l, b.sourceIdleTime)
	return l
}

// remember marks the token with hash key as authenticated.
func (b *ReviewBudget) remember(key string) {
	if b != nil {
		b.seen.Add(key, struct{}{}, b.o.KnownFor)
	}
}

// forget drops the token with hash key from the known ones (the API
// server no longer authenticates it).
func (b *ReviewBudget) forget(key string) {
	if b != nil {
		b.seen.Remove(key)
	}
}

// clientAddress is the address a request's connection came from, without
// its port: the unit of the per-source budget.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
