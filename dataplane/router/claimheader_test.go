package router

import (
	"context"
	"maps"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestClaimUIDHeader plays a tenant whose client names its Sandbox by the
// claim it holds (X-Sandbox-Claim-UID): the router routes only to the
// Sandbox that claim controls, tells the client which Sandbox answered
// (X-Sandbox-UID, never what the sandbox itself wrote there), and says on
// /healthz that it makes the check. A claim UID of another claim reaches
// nothing, and a malformed one is refused before any lookup.
func TestClaimUIDHeader(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.Header().Set(HeaderUID, "forged-by-the-sandbox")
		_, _ = w.Write([]byte("ok"))
	}))
	sb := testSandbox("box", "SandboxClaim") // controlled by claim UID owner-uid
	pod := testPod(sb, "box", "127.0.0.1")
	r := newTestRouter(t, func(o *Options) {
		o.Resolver = fixedRoute(sb, pod)
	})
	p, _ := strconv.Atoi(port)
	headers := func(claimUID string) map[string]string {
		return map[string]string{HeaderSandboxID: "box", HeaderNamespace: "team", HeaderPort: strconv.Itoa(p), HeaderClaimUID: claimUID}
	}

	resp, body := do(t, r, http.MethodGet, "/", headers("owner-uid"), nil)
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("the claim's own Sandbox: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get(HeaderUID); got != string(sb.UID) {
		t.Errorf("X-Sandbox-UID of the answer = %q, want the routed Sandbox's %q (not the sandbox's own header)", got, sb.UID)
	}

	resp, body = do(t, r, http.MethodGet, "/", headers("other-claims-uid"), nil)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(HeaderNotForwarded) != "true" || !strings.Contains(body, "not the sandbox of claim") {
		t.Errorf("another claim's UID: %d %q (not forwarded %q), want 404 made by the router", resp.StatusCode, body, resp.Header.Get(HeaderNotForwarded))
	}
	if resp.Header.Get(HeaderUID) != "" {
		t.Errorf("a refusal names a Sandbox UID: %q", resp.Header.Get(HeaderUID))
	}
	resp, body = do(t, r, http.MethodGet, "/", headers("not a uid!"), nil)
	if resp.StatusCode != http.StatusBadRequest || body != `{"detail":"Invalid claim UID format."}` {
		t.Errorf("a malformed claim UID: %d %q", resp.StatusCode, body)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("the sandbox got %d requests, want only the claim's own one", n)
	}

	resp, _ = do(t, r, http.MethodGet, "/healthz", nil, nil)
	if got := resp.Header.Get(HeaderChecks); !strings.Contains(got, CheckClaimUID) {
		t.Errorf("/healthz %s = %q, want it to list %q", HeaderChecks, got, CheckClaimUID)
	}
}

// TestClaimUIDNeverTakesTheDNSFallback: a request naming a claim, for a
// Sandbox the cache does not hold, is never sent to the name in DNS,
// which nothing checks against the claim (nor is one pinned to a UID).
func TestClaimUIDNeverTakesTheDNSFallback(t *testing.T) {
	dns := startDNS(t, map[string][]netip.Addr{"box.team.svc.cluster.local": {netip.MustParseAddr("10.1.2.3")}})
	r := &CacheResolver{Reader: testReader(t), DNSFallback: true, ClusterDomain: "cluster.local", DNS: dns.Resolver()}
	ctx := context.Background()
	if ep, err := r.Resolve(ctx, Target{ID: "box", Namespace: "team", Port: 8888}); err != nil || ep.Source != SourceDNS {
		t.Fatalf("without a claim the fallback is used: %+v, %v", ep, err)
	}
	for _, target := range []Target{
		{ID: "box", Namespace: "team", Port: 8888, ClaimUID: "claim-uid"},
		{ID: "box", Namespace: "team", Port: 8888, UID: "sandbox-uid"},
	} {
		ep, err := r.Resolve(ctx, target)
		if err == nil || AsError(err).Status != http.StatusNotFound {
			t.Errorf("%+v: %+v, %v, want 404 without the fallback", target, ep, err)
		}
	}
}

// TestClaimUIDGrantsNothing plays bob, whose Role lets him exec into
// bob-box only, and who has learnt the UID of alice's claim (any reader of
// claims can): naming alice's Sandbox with her claim's UID is still 403,
// with no token 401, and her Sandbox sees none of it. The header narrows
// what an authorized request reaches; it never stands in for the review.
func TestClaimUIDGrantsNothing(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = w.Write([]byte("alice's files"))
	}))
	alices := testSandbox("alice-box", "SandboxClaim") // claimed by UID owner-uid
	pod := testPod(alices, "alice-box", "127.0.0.1")
	api := &fakeAPI{}
	r := newTestRouter(t, func(o *Options) {
		o.Authorizer = NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
		o.Resolver = fixedRoute(alices, pod)
	})
	named := map[string]string{HeaderSandboxID: "alice-box", HeaderNamespace: "team", HeaderPort: port, HeaderClaimUID: "owner-uid"}
	ask := func(token string) int { return execAs(t, r, named, token) }
	if got := ask("bob-token"); got != http.StatusForbidden {
		t.Errorf("bob with alice's claim UID: %d, want 403", got)
	}
	for _, token := range []string{"bob-token", ""} {
		if got, id, uid := resolveAs(t, r, named, token); got < 400 || id != "" || uid != "" {
			t.Errorf("asking only where alice-box goes with token %q: %d, named %q (%q); want a refusal naming nothing", token, got, id, uid)
		}
	}
	if got := ask(""); got != http.StatusUnauthorized {
		t.Errorf("no token with alice's claim UID: %d, want 401", got)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("alice's sandbox got %d requests from callers not allowed to exec into it", n)
	}
	if got := ask("alice-token"); got != http.StatusOK || reached.Load() != 1 {
		t.Errorf("alice with her claim's UID: %d, %d requests reached her sandbox; want 200 and 1", got, reached.Load())
	}
}

// fixedRoute resolves every target against sb and its pod (Route).
func fixedRoute(sb *sandboxv1beta1.Sandbox, pod *corev1.Pod) Resolver {
	return ResolverFunc(func(_ context.Context, target Target) (Endpoint, error) {
		ep, e := Route(sb, pod, target)
		if e != nil {
			return ep, e
		}
		return ep, nil // not e: a nil *Error is a non-nil error
	})
}

// asCaller is a copy of headers with, unless token is empty, the bearer
// token.
func asCaller(headers map[string]string, token string) map[string]string {
	h := maps.Clone(headers)
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

// execAs sends a command with headers as the caller of token; it returns
// the status.
func execAs(t *testing.T, r *testRouter, headers map[string]string, token string) int {
	t.Helper()
	resp, _ := do(t, r, http.MethodPost, "/execute", asCaller(headers, token), strings.NewReader(`{"command":"cat secret"}`))
	return resp.StatusCode
}

// resolveAs asks only where headers' request goes (HeaderResolveOnly), as
// execAs does, and returns the status and the Sandbox the answer names.
func resolveAs(t *testing.T, r *testRouter, headers map[string]string, token string) (status int, id, uid string) {
	t.Helper()
	h := asCaller(headers, token)
	h[HeaderResolveOnly] = "true"
	resp, _ := do(t, r, http.MethodGet, "/", h, nil)
	return resp.StatusCode, resp.Header.Get(HeaderSandboxID), resp.Header.Get(HeaderUID)
}
