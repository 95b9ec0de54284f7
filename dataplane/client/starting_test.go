package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// goneThenUp is a transport whose Pod is not found for the first tries,
// then answers 200.
type goneThenUp struct{ tries, gone atomic.Int64 }

func (g *goneThenUp) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.tries.Add(1) <= g.gone.Load() {
		return nil, permanent{podGone{errors.New("port-forward to pod p: " + ErrNotFound.Error())}}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// TestStartingWaitsForThePod: while a Sandbox starts (resume's polling
// health), a port-forward that finds no Pod yet is tried again; on a
// running Sandbox it is final at once (the caller then looks at the
// Sandbox), as before.
func TestStartingWaitsForThePod(t *testing.T) {
	rt := &goneThenUp{}
	rt.gone.Store(3)
	c := &conn{base: "http://p:8888/", http: &http.Client{Transport: rt}, attempts: 3, backoff: time.Millisecond, maxBackoff: time.Millisecond, close: func() {}}
	ctx := context.Background()
	var gone podGone
	if _, err := c.do(ctx, request{op: "health", method: http.MethodGet, endpoint: "", idempotent: true}); !errors.As(err, &gone) || rt.tries.Load() != 1 {
		t.Fatalf("running: err %v after %d tries, want podGone after 1", err, rt.tries.Load())
	}
	rt.tries.Store(0)
	p := c.polling()
	p.backoff, p.maxBackoff = time.Millisecond, time.Millisecond
	resp, err := p.do(ctx, request{op: "health", method: http.MethodGet, endpoint: "", idempotent: true})
	if err != nil {
		t.Fatalf("starting: %v after %d tries, want an answer once the Pod is there", err, rt.tries.Load())
	}
	drainClose(resp)
	if n := rt.tries.Load(); n != 4 {
		t.Errorf("starting: %d tries, want 4 (3 with no Pod, then the answer)", n)
	}
}
