package client

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// boundClaim is a claim of UID uid bound to the Sandbox name, Ready or not.
func boundClaim(name string, uid types.UID, ready bool) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job", UID: uid}}
	c.Status.Sandbox.Name = name
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	c.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: status, Reason: "R"}}
	return c
}

// TestOpenByClaimThroughACheckingRouter: through a router that says on
// /healthz that it checks claim UIDs, a Ready claim's Sandbox is opened
// without reading it (no API request), every request names the claim,
// and once the router named the Sandbox that answered, the next requests
// are pinned to its UID too. The router is asked once per Client.
func TestOpenByClaimThroughACheckingRouter(t *testing.T) {
	f := newFakeCluster(t, "sb-claimed", nil, false)
	router, srv := newFakeRouter(t, f.rt)
	router.checks, router.claimUID, router.sandboxUID = true, "claim-uid", f.uid
	c := f.client(t, WithRouter(srv.URL), WithBearerToken("s3cret"))
	ctx := ctxFor(t)
	for i := range 2 {
		o := c.options(nil)
		sb, err := c.openClaim(ctx, &o, boundClaim(f.name, "claim-uid", true), c.routerChecks(&o))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := sb.Run(ctx, "echo hi"); err != nil {
				t.Fatal(err)
			}
		}
		_ = sb.Close(ctx)
		if i == 0 {
			seen := router.seen()
			if len(seen) != 3 {
				t.Fatalf("router saw %d requests, want health and two runs", len(seen))
			}
			for j, h := range seen {
				if got := h.Get(HeaderSandboxClaimUID); got != "claim-uid" {
					t.Errorf("request %d: X-Sandbox-Claim-UID %q", j, got)
				}
			}
			if got := seen[0].Get(HeaderSandboxUID); got != "" {
				t.Errorf("first request pinned to %q before any answer", got)
			}
			if got := seen[2].Get(HeaderSandboxUID); got != string(f.uid) {
				t.Errorf("a request after the router's answer: X-Sandbox-UID %q, want the answer's %q", got, f.uid)
			}
		}
	}
	if n := f.sandboxGets(); n != 0 {
		t.Errorf("%d reads of the Sandbox, want none: the router checks the claim", n)
	}
	if router.probes != 1 {
		t.Errorf("the router was asked %d times about its checks, want once per Client", router.probes)
	}

	// The claim's status names a Sandbox another claim controls: the
	// router refuses every request, and none reaches that sandbox.
	o := c.options(nil)
	before := f.executes()
	sb, err := c.openClaim(ctx, &o, boundClaim(f.name, "someone-elses-claim", true), c.routerChecks(&o))
	if err == nil {
		_, err = sb.Run(ctx, "echo stolen")
		_ = sb.Close(ctx)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("a Sandbox of another claim: %v, want ErrNotFound", err)
	}
	if n := f.executes() - before; n != 0 {
		t.Errorf("%d commands reached a Sandbox the claim does not control", n)
	}
}

// TestOpenByClaimNeedsTheRoutersWord: the Sandbox is read and checked by
// the SDK, as before, through a router that does not say it checks claims
// (upstream's; a sandbox cannot answer /healthz for it), and for a claim
// that is bound but not Ready.
func TestOpenByClaimNeedsTheRoutersWord(t *testing.T) {
	f := newFakeCluster(t, "sb-upstream", nil, false)
	router, srv := newFakeRouter(t, f.rt)
	router.sandboxUID = f.uid
	c := f.client(t, WithRouter(srv.URL), WithBearerToken("s3cret"))
	ctx := ctxFor(t)
	reads := 0
	for _, tc := range []struct {
		name   string
		checks bool
		ready  bool
	}{{"upstream's router", false, true}, {"a claim not Ready", true, false}} {
		router.mu.Lock()
		router.checks = tc.checks
		router.mu.Unlock()
		c.probesMu.Lock()
		c.probes = nil
		c.probesMu.Unlock()
		claim := boundClaim(f.name, "claim-uid", tc.ready)
		o := c.options(nil)
		_, err := c.openClaim(ctx, &o, claim, c.routerChecks(&o))
		// The fake Sandbox has no claim as owner: the SDK's own check
		// refuses it, which shows it read and checked it.
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want the SDK's ErrNotFound (not controlled by the claim)", tc.name, err)
		}
		if reads++; f.sandboxGets() != reads {
			t.Errorf("%s: %d reads of the Sandbox, want %d", tc.name, f.sandboxGets(), reads)
		}
	}
}
