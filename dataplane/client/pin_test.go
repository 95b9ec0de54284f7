package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
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

// replace deletes the Sandbox and its Pod and makes another Sandbox of the
// same name (a new UID) with its own Pod, as a user who reuses a claim's
// name does; every port-forward to the old Pod ends. It returns once the
// handles' port-forward has seen the new Pod.
func (f *fakeCluster) replace(t *testing.T) {
	t.Helper()
	eventually(t, "the port-forward to follow the Pod", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.podWatchers > 0
	})
	f.mu.Lock()
	f.rv++
	f.podEvents = append(f.podEvents, podEvent{"DELETED", f.podUID, f.rv})
	f.uid = types.UID(string(f.uid) + "-namesake")
	f.sb.UID = f.uid
	f.podUpLocked()
	added := f.podEvents[len(f.podEvents)-1].rv
	f.mu.Unlock()
	f.pf.drop()
	eventually(t, "the port-forward to see the new Pod", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, rv := range append(append([]int(nil), f.podWatchRVs...), f.podListRVs...) {
			if rv >= added {
				return true
			}
		}
		return false
	})
}

// TestStaleSandboxdHandleNeverReachesANamesake: the same over WithSandboxd,
// for REST (Read) and gRPC (Run, and the ProcessService itself): once the
// name stands for another Sandbox, the handle's calls fail with
// ErrNotFound and none reaches the namesake's runtime.
func TestStaleSandboxdHandleNeverReachesANamesake(t *testing.T) {
	targets, base := realSandboxd(t)
	f := newFakeClusterPorts(t, "sb-reused-sd", nil, false, nil, targets)
	sb := f.open(t, WithSandboxd())
	ctx := ctxFor(t)
	if res, err := sb.Run(ctx, "echo mine"); err != nil || res.Stdout != "mine\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	f.replace(t)
	if _, err := sb.Run(ctx, "touch stranger-run"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Run through a stale handle = %v; want ErrNotFound", err)
	}
	if _, err := sb.Read(ctx, "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read through a stale handle = %v; want ErrNotFound", err)
	}
	if ps, err := sb.ProcessService(); err == nil {
		_, err = ps.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"touch", "stranger-ps"}}})
		if err == nil {
			t.Errorf("ProcessService.Execute through a stale handle succeeded")
		}
	}
	for _, name := range []string{"stranger-run", "stranger-ps"} {
		if _, err := os.Stat(filepath.Join(base, name)); err == nil {
			t.Errorf("the namesake's runtime ran a command from the stale handle (%s exists)", name)
		}
	}
}

// TestStartingHandleNeverReachesANamesake: the resume's polling tries a
// port-forward again when the Pod is not found, and also when a Pod of the
// name is another Sandbox's (a namesake): each try checks the Pod's
// controller again, so it keeps waiting and never sends anything to the
// namesake's runtime, whatever the tries.
func TestStartingHandleNeverReachesANamesake(t *testing.T) {
	f := newFakeCluster(t, "sb-starting", nil, false)
	sb := f.open(t)
	if err := sb.health(ctxFor(t)); err != nil {
		t.Fatalf("health of its own Pod: %v", err)
	}
	f.replace(t)
	before := len(f.rt.recorded())
	ctx, cancel := context.WithTimeout(ctxFor(t), 2*time.Second)
	defer cancel()
	if err := sb.health(ctx); err == nil {
		t.Fatal("a starting handle's health check answered by the namesake's Pod")
	}
	if n := len(f.rt.recorded()) - before; n != 0 {
		t.Errorf("the namesake's runtime got %d requests from the starting handle", n)
	}
}
