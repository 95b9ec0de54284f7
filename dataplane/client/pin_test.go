package client

import (
	"errors"
	"testing"
)

// TestStaleHandleNeverReachesANamesake: a handle (port-forward) whose
// Sandbox is deleted while another Sandbox of the same name, and its Pod
// of the same name, take its place gets ErrNotFound: the SDK pinned the
// UID it resolved, and nothing the stale handle sends reaches the
// namesake's runtime.
func TestStaleHandleNeverReachesANamesake(t *testing.T) {
	f := newFakeCluster(t, "sb-reused", nil, false)
	sb := f.open(t)
	ctx := ctxFor(t)
	if res, err := sb.Run(ctx, "echo mine"); err != nil || res.Stdout != "mine\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	before := f.executes()
	f.replace(t)
	_, err := sb.Run(ctx, "echo stranger")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Run through a stale handle = %v; want ErrNotFound", err)
	}
	if _, err := sb.Exists(ctx, "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Exists through a stale handle = %v; want ErrNotFound", err)
	}
	if n := f.executes(); n != before {
		t.Errorf("the namesake's runtime ran %d commands from the stale handle", n-before)
	}
}

// TestRouterRequestsCarryTheUID: a handle that resolved its Sandbox
// through the API sends X-Sandbox-UID on every request through a router,
// so the router refuses it once the name stands for another Sandbox.
func TestRouterRequestsCarryTheUID(t *testing.T) {
	f := newFakeCluster(t, "sb-routed", nil, false)
	router, srv := newFakeRouter(t, f.rt)
	sb := f.open(t, WithRouter(srv.URL), WithBearerToken("s3cret"))
	if _, err := sb.Run(ctxFor(t), "echo routed"); err != nil {
		t.Fatal(err)
	}
	seen := router.seen()
	if len(seen) < 2 {
		t.Fatalf("router saw %d requests, want the health check and the run", len(seen))
	}
	for i, h := range seen {
		if got := h.Get(HeaderSandboxUID); got != string(f.uid) {
			t.Errorf("request %d: X-Sandbox-UID %q, want %q", i, got, f.uid)
		}
	}
}
