package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// TestCreateThroughAClaimRoutingRouter: through a router that routes by
// claim, Create watches nothing: its one request names only the claim it
// made and asks only where it goes, and the handle takes the Sandbox's name
// and UID from the router's answer (the runtime is not asked); its commands
// then name that Sandbox, its UID and the claim. Through a router that
// sends the request on (one that does not know HeaderResolveOnly), the
// runtime's answer through it does as well. Close deletes the claim.
func TestCreateThroughAClaimRoutingRouter(t *testing.T) {
	for _, resolves := range []bool{true, false} {
		t.Run(map[bool]string{true: "answered by the router", false: "sent on"}[resolves], func(t *testing.T) { createRouted(t, resolves) })
	}
}

func createRouted(t *testing.T, resolves bool) {
	a, c := newClaimsAPI(t)
	suffixes(t, "r1")
	rt, _ := newFakeRuntime(t)
	router, srv := newFakeRouter(t, rt)
	router.checks, router.claimUID, router.sandboxUID, router.routed = true, "uid-sandbox-claim-r1", "sb-uid", "sb-routed"
	router.resolves = resolves
	ctx := ctxFor(t)
	sb, err := c.Create(ctx, "team-a", "pool", fast, WithRouter(srv.URL), WithBearerToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name() != "sb-routed" || sb.ClaimName() != "sandbox-claim-r1" || sb.PodName() != "sb-routed" {
		t.Errorf("handle names Sandbox %q (pod %q) of claim %q", sb.Name(), sb.PodName(), sb.ClaimName())
	}
	opened := a.watchesOpened()
	if len(opened) != 0 {
		t.Errorf("watches opened: %v, want none (the router waits for the claim)", opened)
	}
	if _, err := sb.Run(ctx, "echo hi"); err != nil {
		t.Fatal(err)
	}
	seen := router.seen()
	if len(seen) != 2 {
		t.Fatalf("router saw %d requests, want the health request and the run", len(seen))
	}
	if id, claim, only := seen[0].Get(HeaderSandboxID), seen[0].Get(HeaderSandboxClaimUID), seen[0].Get(HeaderResolveOnly); id != "" || claim != "uid-sandbox-claim-r1" || only != "true" {
		t.Errorf("the first request names Sandbox %q and claim %q (resolve only %q), want only the claim, resolved only", id, claim, only)
	}
	if got := seen[1].Get(HeaderResolveOnly); got != "" {
		t.Errorf("the run asks to be resolved only (%q)", got)
	}
	if got, want := len(rt.recorded()), map[bool]int{true: 1, false: 2}[resolves]; got != want {
		t.Errorf("the runtime got %d requests, want %d", got, want)
	}
	if id, uid, claim := seen[1].Get(HeaderSandboxID), seen[1].Get(HeaderSandboxUID), seen[1].Get(HeaderSandboxClaimUID); id != "sb-routed" || uid != "sb-uid" || claim != "uid-sandbox-claim-r1" {
		t.Errorf("the run names Sandbox %q, UID %q, claim %q; want the router's answer and the claim", id, uid, claim)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.deleted) != 1 {
		t.Errorf("deletes %v, want the claim's", a.deleted)
	}
}

// TestCreateWithClaimReady: WithClaimReady makes Create wait for the
// claim's Ready with its watch even through a router that routes by claim.
func TestCreateWithClaimReady(t *testing.T) {
	a, c := newClaimsAPI(t)
	a.bindTo = "sb-bound"
	suffixes(t, "w1")
	rt, _ := newFakeRuntime(t)
	router, srv := newFakeRouter(t, rt)
	router.checks, router.claimUID, router.sandboxUID, router.routed, router.resolves = true, "uid-sandbox-claim-w1", "sb-uid", "sb-bound", true
	ctx := ctxFor(t)
	sb, err := c.Create(ctx, "team-a", "pool", fast, WithRouter(srv.URL), WithBearerToken("s3cret"), WithClaimReady())
	if err != nil {
		t.Fatal(err)
	}
	opened := a.watchesOpened()
	if len(opened) != 1 {
		t.Errorf("watches opened: %v, want the claim's", opened)
	}
	for _, h := range router.seen() {
		if h.Get(HeaderResolveOnly) != "" || h.Get(HeaderSandboxID) == "" {
			t.Errorf("a request routed by claim alone: %v", h)
		}
	}
	_ = sb.Close(ctx)
}

// TestCreateFallsBackToTheClaimsWatch: when the router does not find the
// claim's Sandbox within its wait (404, not forwarded), Create waits for
// the claim with its watch as through any router, and opens it by claim.
func TestCreateFallsBackToTheClaimsWatch(t *testing.T) {
	a, c := newClaimsAPI(t)
	a.bindTo = "sb-bound"
	suffixes(t, "f1")
	rt, _ := newFakeRuntime(t)
	router, srv := newFakeRouter(t, rt)
	router.checks, router.claimUID, router.sandboxUID = true, "uid-sandbox-claim-f1", "sb-uid"
	ctx := ctxFor(t)
	sb, err := c.Create(ctx, "team-a", "pool", fast, WithRouter(srv.URL), WithBearerToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name() != "sb-bound" {
		t.Errorf("handle names %q, want the claim's status's sb-bound", sb.Name())
	}
	opened := a.watchesOpened()
	if len(opened) != 1 || opened[0] != "sandbox-claim-f1" {
		t.Errorf("watches opened: %v, want the claim's, after the router's refusal", opened)
	}
	if _, err := sb.Run(ctx, "echo hi"); err != nil {
		t.Fatal(err)
	}
	_ = sb.Close(ctx)
}

// TestCreateRoutedTimeoutSaysWhy: when the ready timeout passes while the
// router still waits for the claim's Sandbox, Create's error is
// ErrTimeout with what the claim says of itself (its Ready condition), as
// the claim's watch would have said it, and the claim is deleted.
func TestCreateRoutedTimeoutSaysWhy(t *testing.T) {
	a, c := newClaimsAPI(t)
	a.ready = &metav1.Condition{Type: extv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "WarmPoolEmpty", Message: "the pool has no Ready member"}
	suffixes(t, "t1")
	rt, _ := newFakeRuntime(t)
	router, srv := newFakeRouter(t, rt)
	router.checks, router.claimUID, router.hold = true, "uid-sandbox-claim-t1", true
	_, err := c.Create(ctxFor(t), "team-a", "pool", fast, WithRouter(srv.URL), WithBearerToken("s3cret"), WithReadyTimeout(300*time.Millisecond))
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "no sandbox bound (Ready=False WarmPoolEmpty: the pool has no Ready member)") {
		t.Errorf("Create: %v, want ErrTimeout saying the claim's Ready condition", err)
	}
	if len(a.deleted) != 1 {
		t.Errorf("deletes %v, want the claim's", a.deleted)
	}
}
