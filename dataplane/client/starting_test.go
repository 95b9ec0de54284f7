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

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
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

// TestResumeWaitsPastAStaleReady: a Sandbox suspended a moment ago whose
// status still says Ready (the controller has not reported the suspend:
// Ready's observedGeneration is the spec's previous one) is resumed by
// Open, which waits for a Ready observed at the resumed spec before it
// connects: no call goes to a Pod that is not there yet.
func TestResumeWaitsPastAStaleReady(t *testing.T) {
	f := newFakeCluster(t, "sb-stale-ready", optedIn, false)
	f.mu.Lock()
	f.sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	f.sb.Generation++
	f.rv++
	f.podEvents = append(f.podEvents, podEvent{"DELETED", f.podUID, f.rv})
	f.podUID = ""
	f.bumpLocked() // Ready=True still, observed at the generation before
	f.mu.Unlock()
	f.pf.drop()

	sb := f.open(t)
	if n := len(f.recordedPatches()); n != 1 {
		t.Fatalf("%d PATCHes; want one resume", n)
	}
	if n := f.refusedPortForwards(); n != 0 {
		t.Errorf("%d port-forwards found no Pod: Open took the Ready from before the suspend as the resumed Sandbox's", n)
	}
	if res, err := sb.Run(ctxFor(t), "echo up"); err != nil || res.Stdout != "up\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}
