package router

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// claimedBy is a Sandbox name in ns controlled by the claim of UID
// claimUID, with a Ready Pod on 127.0.0.1.
func claimedBy(name, ns string, claimUID types.UID) []client.Object {
	sb := testSandbox(name, "SandboxClaim")
	sb.Namespace, sb.OwnerReferences[0].UID = ns, claimUID
	pod := testPod(sb, name, "127.0.0.1")
	return []client.Object{sb, pod}
}

// indexedReader is a fake cache with the router's claim UID index.
func indexedReader(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithIndex(&sandboxv1beta1.Sandbox{}, IndexClaimUID, ClaimUIDIndex).Build()
}

// TestClaimRoute plays a client that knows its claim, not yet its
// Sandbox: a request naming only the claim (X-Sandbox-Claim-UID, no
// X-Sandbox-ID) reaches the Sandbox that claim controls in the request's
// namespace, waits while the claim has not taken one (up to ClaimWait),
// and its answer names the Sandbox (never what the sandbox wrote). A claim
// with no Sandbox, one in another namespace and one with two get the
// router's refusal, and /healthz says the router routes by claim.
func TestClaimRoute(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.Header().Set(HeaderSandboxID, "forged-by-the-sandbox")
		w.Header().Set(HeaderUID, "forged-by-the-sandbox")
		_, _ = w.Write([]byte("ok"))
	}))
	objs := claimedBy("box", "team", "claim-1")
	objs = append(objs, claimedBy("elsewhere", "other", "claim-2")...)
	objs = append(objs, claimedBy("twin-a", "team", "claim-3")...)
	objs = append(objs, claimedBy("twin-b", "team", "claim-3")...)
	reader := indexedReader(t, objs...)
	r := newTestRouter(t, func(o *Options) {
		o.Resolver = &CacheResolver{Reader: reader, AllowLocalAddresses: true}
		// A claim-only request waits ClaimWait, not ResolveWait.
		o.RouteByClaim, o.ResolveWait, o.ClaimWait = true, 100*time.Millisecond, 3*time.Second
	})
	ask := func(ns, claimUID string) (*http.Response, string) {
		return do(t, r, http.MethodGet, "/", map[string]string{HeaderNamespace: ns, HeaderPort: port, HeaderClaimUID: claimUID}, nil)
	}

	resp, body := ask("team", "claim-1")
	if resp.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("the claim's Sandbox: %d %q", resp.StatusCode, body)
	}
	if id, uid := resp.Header.Get(HeaderSandboxID), resp.Header.Get(HeaderUID); id != "box" || uid != "uid-box" {
		t.Errorf("the answer names %q (UID %q), want box (uid-box) as the router routed it", id, uid)
	}

	// Asked only where it goes: the router answers, the sandbox sees nothing.
	resp, body = do(t, r, http.MethodGet, "/", map[string]string{HeaderNamespace: "team", HeaderPort: port, HeaderClaimUID: "claim-1", HeaderResolveOnly: "true"}, nil)
	if resp.StatusCode != http.StatusNoContent || body != "" || resp.Header.Get(HeaderSandboxID) != "box" || resp.Header.Get(HeaderUID) != "uid-box" ||
		resp.Header.Get(HeaderNotForwarded) != "true" || reached.Load() != 1 {
		t.Errorf("resolve only: %d %q, named %q (%q), not forwarded %q, the sandbox got %d requests; want 204 naming box, the sandbox 1",
			resp.StatusCode, body, resp.Header.Get(HeaderSandboxID), resp.Header.Get(HeaderUID), resp.Header.Get(HeaderNotForwarded), reached.Load())
	}

	resolveWait := func(o *Options) { o.ResolveWait = 200 * time.Millisecond }
	short := newTestRouter(t, func(o *Options) {
		o.Resolver = &CacheResolver{Reader: reader, AllowLocalAddresses: true}
		o.RouteByClaim = true
		resolveWait(o)
	})
	for _, c := range []struct{ name, ns, claim, want string }{
		{"a claim with no Sandbox", "team", "claim-none", "No Sandbox of claim UID claim-none"},
		{"a claim of another namespace", "team", "claim-2", "No Sandbox of claim UID claim-2"},
		{"a claim with two Sandboxes", "team", "claim-3", "controls 2 Sandboxes"},
	} {
		resp, body := do(t, short, http.MethodGet, "/", map[string]string{HeaderNamespace: c.ns, HeaderPort: port, HeaderClaimUID: c.claim}, nil)
		if resp.StatusCode < 400 || resp.Header.Get(HeaderNotForwarded) != "true" || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want the router's refusal saying %q", c.name, resp.StatusCode, body, c.want)
		}
	}
	resp, body = do(t, short, http.MethodGet, "/", map[string]string{HeaderNamespace: "team", HeaderPort: port}, nil)
	if resp.StatusCode != http.StatusBadRequest || body != `{"detail":"X-Sandbox-ID header is required."}` {
		t.Errorf("neither a Sandbox nor a claim: %d %q", resp.StatusCode, body)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("the sandboxes got %d requests, want the claim's own one", n)
	}

	// The claim takes its Sandbox while the request waits (longer than
	// the resolve wait: ClaimWait).
	go func() {
		time.Sleep(300 * time.Millisecond)
		for _, o := range claimedBy("late", "team", "claim-late") {
			if err := reader.Create(context.Background(), o); err != nil {
				t.Error(err)
			}
		}
	}()
	resp, _ = ask("team", "claim-late")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderSandboxID) != "late" {
		t.Errorf("a claim that takes its Sandbox while the request waits: %d, named %q", resp.StatusCode, resp.Header.Get(HeaderSandboxID))
	}

	// The claim has its Sandbox, whose Pod is Ready only later (still
	// within ClaimWait, past the resolve wait).
	slow := claimedBy("slow", "team", "claim-slow")
	if err := reader.Create(context.Background(), slow[0]); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := reader.Create(context.Background(), slow[1]); err != nil {
			t.Error(err)
		}
	}()
	resp, _ = ask("team", "claim-slow")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderSandboxID) != "slow" {
		t.Errorf("a claim whose Sandbox gets its Pod while the request waits: %d, named %q", resp.StatusCode, resp.Header.Get(HeaderSandboxID))
	}

	resp, _ = do(t, r, http.MethodGet, "/healthz", nil, nil)
	if got := resp.Header.Get(HeaderChecks); !strings.Contains(got, CheckClaimRoute) || !strings.Contains(got, CheckClaimUID) {
		t.Errorf("/healthz %s = %q, want %q and %q", HeaderChecks, got, CheckClaimUID, CheckClaimRoute)
	}
}

// TestClaimRouteIsOptIn: without RouteByClaim (--route-by-claim), a
// request naming only its claim gets upstream's 400 and reaches nothing,
// and /healthz does not say the router routes by claim: a router that
// cannot tell whether controller references to claims are guarded does
// not trust them.
func TestClaimRouteIsOptIn(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	r := newTestRouter(t, func(o *Options) {
		o.Resolver = &CacheResolver{Reader: indexedReader(t, claimedBy("box", "team", "claim-1")...), AllowLocalAddresses: true}
	})
	resp, body := do(t, r, http.MethodGet, "/", map[string]string{HeaderNamespace: "team", HeaderPort: port, HeaderClaimUID: "claim-1"}, nil)
	if resp.StatusCode != http.StatusBadRequest || body != `{"detail":"X-Sandbox-ID header is required."}` || reached.Load() != 0 {
		t.Errorf("a claim-only request without --route-by-claim: %d %q, %d reached the sandbox", resp.StatusCode, body, reached.Load())
	}
	resp, _ = do(t, r, http.MethodGet, "/healthz", nil, nil)
	if got := resp.Header.Get(HeaderChecks); got != CheckClaimUID {
		t.Errorf("/healthz %s = %q, want only %q", HeaderChecks, got, CheckClaimUID)
	}
}

// TestClaimRouteGrantsNothing plays bob, whose Role lets him exec into
// bob-box only, and who knows the UID of alice's claim: naming only that
// claim gets him 403 and her sandbox nothing; with no token the request
// is refused 401 before the router looks for the claim's Sandbox (so an
// anonymous caller can neither probe claims nor make it wait); alice
// reaches her Sandbox.
func TestClaimRouteGrantsNothing(t *testing.T) {
	var reached atomic.Int64
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = w.Write([]byte("alice's files"))
	}))
	api := &fakeAPI{}
	r := newTestRouter(t, func(o *Options) {
		o.Authorizer = NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
		o.Resolver = &CacheResolver{Reader: indexedReader(t, claimedBy("alice-box", "team", "alices-claim")...), AllowLocalAddresses: true}
		o.RouteByClaim, o.ResolveWait = true, time.Second
	})
	byClaim := map[string]string{HeaderNamespace: "team", HeaderPort: port, HeaderClaimUID: "alices-claim"}
	ask := func(token string) int { return execAs(t, r, byClaim, token) }
	if got := ask("bob-token"); got != http.StatusForbidden {
		t.Errorf("bob with alice's claim UID: %d, want 403", got)
	}
	if got, id, uid := resolveAs(t, r, byClaim, "bob-token"); got != http.StatusForbidden || id != "" || uid != "" {
		t.Errorf("bob asking only where alice's claim goes: %d, named %q (%q); want 403 naming nothing", got, id, uid)
	}
	before := r.resolves.Load()
	if got := ask(""); got != http.StatusUnauthorized {
		t.Errorf("no token with alice's claim UID: %d, want 401", got)
	}
	if got := ask("forged-token"); got != http.StatusUnauthorized {
		t.Errorf("a token the API server does not know: %d, want 401", got)
	}
	if got, id, uid := resolveAs(t, r, byClaim, ""); got != http.StatusUnauthorized || id != "" || uid != "" {
		t.Errorf("no token asking only where alice's claim goes: %d, named %q (%q); want 401 naming nothing", got, id, uid)
	}
	if n := r.resolves.Load() - before; n != 0 {
		t.Errorf("the router looked %d times for the claim's Sandbox for unauthenticated callers", n)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("alice's sandbox got %d requests from callers not allowed to exec into it", n)
	}
	if got := ask("alice-token"); got != http.StatusOK || reached.Load() != 1 {
		t.Errorf("alice by her claim: %d, %d requests reached her sandbox; want 200 and 1", got, reached.Load())
	}
}

// TestClaimUIDIndex: only a controller reference to a SandboxClaim of our
// API group indexes a Sandbox.
func TestClaimUIDIndex(t *testing.T) {
	for _, c := range []struct {
		kind string
		want []string
	}{{"SandboxClaim", []string{"owner-uid"}}, {"SandboxWarmPool", nil}, {"", nil}} {
		got := ClaimUIDIndex(testSandbox("box", c.kind))
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("owner %q: %v, want %v", c.kind, got, c.want)
		}
	}
	sb := testSandbox("box", "SandboxClaim")
	sb.OwnerReferences[0].APIVersion = "example.com/v1"
	if got := ClaimUIDIndex(sb); got != nil {
		t.Errorf("a SandboxClaim of another group: %v", got)
	}
	sb.OwnerReferences[0] = metav1.OwnerReference{}
	if got := ClaimUIDIndex(sb); got != nil {
		t.Errorf("no owner: %v", got)
	}
}

// resumeRecorder is a SandboxWriter that records which Sandboxes it was
// asked to resume, and resumes none.
type resumeRecorder struct {
	mu   sync.Mutex
	keys []resume.Key
}

func (w *resumeRecorder) SetRunning(_ context.Context, k resume.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, k)
	return nil
}

func (w *resumeRecorder) asked() []resume.Key {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.keys)
}

// TestClaimRouteResumesOnlyForItsCallers plays bob again, against alice's
// Sandbox suspended with resume on connect: naming only her claim gets him
// 403 and never resumes it (the router finds the claim's Sandbox, then
// authorizes, then routes or resumes); alice's own request by claim does
// resume it. A claim-only request that also sends X-Sandbox-UID reaches
// the claim's Sandbox only if that is its UID.
func TestClaimRouteResumesOnlyForItsCallers(t *testing.T) {
	objs := claimedBy("alice-box", "team", "alices-claim")
	sb := objs[0].(*sandboxv1beta1.Sandbox)
	sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	sb.Annotations = map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}
	writer := &resumeRecorder{}
	api := &fakeAPI{}
	r := newTestRouter(t, func(o *Options) {
		o.Authorizer = NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
		o.Resolver = &CacheResolver{Reader: indexedReader(t, objs...), AllowLocalAddresses: true}
		o.Resume, o.ResumeTimeout = writer, 200*time.Millisecond
		o.RouteByClaim, o.ResolveWait = true, 100*time.Millisecond
	})
	port := okBackend(t)
	byClaim := map[string]string{HeaderNamespace: "team", HeaderPort: port, HeaderClaimUID: "alices-claim"}
	if got := execAs(t, r, byClaim, "bob-token"); got != http.StatusForbidden {
		t.Errorf("bob with alice's claim UID: %d, want 403", got)
	}
	if got, id, _ := resolveAs(t, r, byClaim, "bob-token"); got != http.StatusForbidden || id != "" {
		t.Errorf("bob asking only where alice's claim goes: %d, named %q; want 403 naming nothing", got, id)
	}
	if got := execAs(t, r, byClaim, ""); got != http.StatusUnauthorized {
		t.Errorf("no token with alice's claim UID: %d, want 401", got)
	}
	if k := writer.asked(); len(k) != 0 {
		t.Fatalf("callers not allowed to exec into alice's Sandbox resumed it: %v", k)
	}

	wrongUID := maps.Clone(byClaim)
	wrongUID[HeaderUID] = "uid-of-another-box"
	if got := execAs(t, r, wrongUID, "alice-token"); got != http.StatusNotFound {
		t.Errorf("alice's claim with another Sandbox's UID: %d, want 404", got)
	}
	if k := writer.asked(); len(k) != 0 {
		t.Fatalf("a request pinned to another UID resumed alice's Sandbox: %v", k)
	}

	// Alice's own request resumes it (it stays Suspended here, so the
	// request ends when ResumeTimeout passes).
	_ = execAs(t, r, byClaim, "alice-token")
	want := resume.Key{Namespace: "team", Name: "alice-box", UID: sb.UID}
	if k := writer.asked(); len(k) != 1 || k[0] != want {
		t.Errorf("alice by her claim resumed %v, want %v once", k, want)
	}
}
