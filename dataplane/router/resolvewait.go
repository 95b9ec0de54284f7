package router

import (
	"context"
	"time"
)

// Waiting for the cache: a request whose Sandbox is not routable yet looks
// again when the cache changes (Changes), up to its wait.

// resolvePoll is how often a waiting request looks at the cache again
// when the cache tells of no change (Options.Changes). A variable for the
// tests alone.
var resolvePoll = 50 * time.Millisecond

// changeSettle is how long a waiting request told of a change waits before
// it looks (a burst of events makes one look, not one each).
const changeSettle = 2 * time.Millisecond

// Pause waits until changed (Changes.Wait, taken before the last look at
// the cache) is closed, then changeSettle more, or d passes, or ctx ends;
// false when ctx ended. A nil changed waits d.
func Pause(ctx context.Context, changed <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-changed:
	}
	s := time.NewTimer(changeSettle)
	defer s.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.C:
		return true
	}
}

// resolveWaiting resolves t, looking again for up to wait (ResolveWait,
// or a claim-only request's ClaimWait) while the answer is a state that
// may change in a moment. A Sandbox that opted in to resume on connect is
// resumed, or waited for, until it is routable, up to ResumeTimeout and
// the request's deadline (awaitResume): only ever for a caller already
// authorized on it.
func (h *Handler) resolveWaiting(ctx context.Context, t Target, wait time.Duration, requestDeadline time.Time) (Endpoint, *Error) {
	start := time.Now()
	deadline := earliest(start.Add(wait), requestDeadline)
	for looks := 1; ; looks++ {
		changed := h.o.Changes.Wait()
		ep, err := h.o.Resolver.Resolve(ctx, t)
		if err == nil {
			if looks > 1 {
				h.o.Metrics.resolveWaited(time.Since(start).Seconds())
			}
			return ep, nil
		}
		e := AsError(err)
		if e.Resume != nil {
			return h.awaitResume(ctx, t, e, requestDeadline)
		}
		left := time.Until(deadline)
		if !e.Retry || left <= 0 || !Pause(ctx, changed, min(left, resolvePoll)) {
			return ep, e
		}
	}
}
