package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// A program that opens many sandboxes at once with a config from a
// kubeconfig (QPS unset) is not held back by client-go's default of 5
// requests a second: 40 Opens of names that do not exist (two GETs each,
// answered at once) all get their answer within a deadline that the
// default limiter would need 14 s to let them through.
func TestUnsetQPSIsNotThrottled(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 0 || cfg.RateLimiter != nil {
		t.Fatalf("New changed the caller's config: QPS %v, limiter %v", cfg.QPS, cfg.RateLimiter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = c.Open(ctx, "team-a", "missing") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open %d: want ErrNotFound, got %v", i, err)
		}
	}
	if got := requests.Load(); got != 2*n {
		t.Errorf("the server saw %d requests, want %d", got, 2*n)
	}
}

// A limit the caller sets is one budget for the Client, whichever API
// group a request goes to; a negative QPS means none.
func TestRateLimitIsOneBudget(t *testing.T) {
	own := flowcontrol.NewTokenBucketRateLimiter(3, 4)
	for _, tc := range []struct {
		name    string
		cfg     rest.Config
		none    bool
		qps     float32
		limiter flowcontrol.RateLimiter
	}{
		{name: "unset", cfg: rest.Config{}, none: true},
		{name: "negative", cfg: rest.Config{QPS: -1}, none: true},
		{name: "qps", cfg: rest.Config{QPS: 7}, qps: 7},
		{name: "qps and burst", cfg: rest.Config{QPS: 7, Burst: 20}, qps: 7},
		{name: "limiter", cfg: rest.Config{QPS: 9, RateLimiter: own}, qps: 3, limiter: own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Host = "https://127.0.0.1:1"
			c, err := New(&tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := []flowcontrol.RateLimiter{c.sandboxes.GetRateLimiter(), c.extensions.GetRateLimiter(), c.core.GetRateLimiter()}
			for i, l := range got {
				switch {
				case tc.none && l != nil:
					t.Fatalf("client %d: a limiter (QPS %v), want none", i, l.QPS())
				case tc.none:
				case l == nil:
					t.Fatalf("client %d: no limiter, want QPS %v", i, tc.qps)
				case l != got[0]:
					t.Fatalf("client %d has a limiter of its own, want the one the others share", i)
				case l.QPS() != tc.qps:
					t.Fatalf("client %d: QPS %v, want %v", i, l.QPS(), tc.qps)
				case tc.limiter != nil && l != tc.limiter:
					t.Fatalf("client %d: not the caller's limiter", i)
				}
			}
		})
	}
}
