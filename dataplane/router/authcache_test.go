package router

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestReviewsRefreshAhead: a caller who keeps sending requests is asked
// about again in the background in the last quarter of the TTL, so no
// request of his waits for a review after the first; once the API server
// stops authenticating his token, that background answer ends his access
// before the TTL would have.
func TestReviewsRefreshAhead(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	const ttl = 10 * time.Second
	a := NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: ttl})
	clock := clocktesting.NewFakeClock(time.Now())
	a.users, a.grant = newReviewCache(64, clock), newReviewCache(64, clock)
	req := func(name string) *Error { return a.Authorize(ctx, bearer("alice-token"), "team", name) }
	eventually := func(what string, n *atomic.Int64, want int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); n.Load() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d, want %d", what, n.Load(), want)
			}
		}
	}

	if e := req("box-1"); e != nil {
		t.Fatal(e)
	}
	if api.reviews.Load() != 1 || api.accesses.Load() != 1 {
		t.Fatalf("first request: %d TokenReviews, %d SubjectAccessReviews, want 1 and 1", api.reviews.Load(), api.accesses.Load())
	}
	clock.Step(ttl / 2) // not near the end yet: nothing asked
	if e := req("box-2"); e != nil {
		t.Fatal(e)
	}
	time.Sleep(10 * time.Millisecond)
	if api.reviews.Load() != 1 || api.accesses.Load() != 1 {
		t.Errorf("half-way through the TTL: %d TokenReviews, %d SubjectAccessReviews, want 1 and 1", api.reviews.Load(), api.accesses.Load())
	}
	clock.Step(ttl/2 - ttl/10) // in the last quarter: served, and asked again behind
	if e := req("box-3"); e != nil {
		t.Fatal(e)
	}
	eventually("TokenReviews after the refresh", &api.reviews, 2)
	eventually("SubjectAccessReviews after the refresh", &api.accesses, 2)
	clock.Step(ttl / 5) // past the first answers' end: the refreshed ones serve
	if e := req("box-4"); e != nil {
		t.Fatal(e)
	}
	time.Sleep(10 * time.Millisecond)
	if api.reviews.Load() != 2 || api.accesses.Load() != 2 {
		t.Errorf("after the first answers' TTL: %d TokenReviews, %d SubjectAccessReviews, want 2 and 2 (no wait for a review)", api.reviews.Load(), api.accesses.Load())
	}

	// The token is revoked: the next background ask removes it.
	api.revoked.Store(true)
	clock.Step(ttl * 7 / 10) // the refreshed answers in their last quarter
	if e := req("box-5"); e != nil {
		t.Errorf("the kept answer still serves while it is asked again: %+v", e)
	}
	eventually("TokenReviews after the revocation", &api.reviews, 3)
	if e := req("box-6"); e == nil || e.Status != http.StatusUnauthorized {
		t.Errorf("after the API server stopped authenticating the token: %+v, want 401", e)
	}
}

// TestBurstOfFirstRequestsOneReview: 20 requests at once, each to a new
// Sandbox, with nothing kept yet (a burst of claims reaching their
// Sandboxes) wait for one TokenReview and one SubjectAccessReview, and
// all get the answer.
func TestBurstOfFirstRequestsOneReview(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{holdTokens: make(chan struct{}), holdAccesses: make(chan struct{})}
	a := NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
	const n = 20
	refused := make(chan *Error, n)
	for i := range n {
		go func() { refused <- a.Authorize(ctx, bearer("alice-token"), "team", fmt.Sprintf("box-%d", i)) }()
	}
	// Each review is held until every request has had time to join it.
	release := func(what string, n *atomic.Int64, hold chan struct{}) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); n.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s was sent", what)
			}
		}
		time.Sleep(200 * time.Millisecond)
		close(hold)
	}
	release("TokenReview", &api.reviews, api.holdTokens)
	release("SubjectAccessReview", &api.accesses, api.holdAccesses)
	for range n {
		if e := <-refused; e != nil {
			t.Errorf("refused: %+v", e)
		}
	}
	if api.reviews.Load() != 1 || api.accesses.Load() != 1 {
		t.Errorf("%d requests at once: %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", n, api.reviews.Load(), api.accesses.Load())
	}
}
