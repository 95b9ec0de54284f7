package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runtime is the smallest legacy runtime: health and /execute of echo.
func runtime(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/execute" {
			return
		}
		var in struct{ Command string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		_ = json.NewEncoder(w).Encode(map[string]any{"stdout": strings.TrimPrefix(in.Command, "echo ") + "\n", "exit_code": 0})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// counting returns a config whose watch requests are counted by resource.
func counting() (*rest.Config, func(resource string) int) {
	var mu sync.Mutex
	watches := map[string]int{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") == "true" {
				parts := strings.Split(r.URL.Path, "/")
				mu.Lock()
				watches[parts[len(parts)-1]]++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg, func(resource string) int {
		mu.Lock()
		defer mu.Unlock()
		return watches[resource]
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func claims(t *testing.T, ns string) []extv1beta1.SandboxClaim {
	t.Helper()
	var list extv1beta1.SandboxClaimList
	if err := env.Client.List(ctxFor(t), &list, crclient.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var live []extv1beta1.SandboxClaim
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			live = append(live, c)
		}
	}
	return live
}

func TestCreateRunClose(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	env.CreatePool(t, ns, "python-pool", 1)
	cfg, watches := counting()
	c, err := sdk.New(cfg, sdk.WithBaseURL(runtime(t).URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)

	before := time.Now()
	sb, err := c.Create(ctx, ns, "python-pool")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got := claims(t, ns)
	if len(got) != 1 {
		t.Fatalf("%d claims; want the one Create made", len(got))
	}
	claim := got[0]
	if claim.GenerateName != sdk.ClaimGenerateName || !strings.HasPrefix(claim.Name, "sandbox-claim-") ||
		claim.Spec.WarmPoolRef.Name != "python-pool" || sb.ClaimName() != claim.Name {
		t.Errorf("claim %s (generateName %q, pool %q), sandbox's claim %q", claim.Name, claim.GenerateName, claim.Spec.WarmPoolRef.Name, sb.ClaimName())
	}
	at, err := time.Parse(time.RFC3339Nano, claim.Annotations[extv1beta1.AnnotationClientFirstRequestedAt])
	if err != nil || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
		t.Errorf("client-first-requested-at %q: %v", claim.Annotations[extv1beta1.AnnotationClientFirstRequestedAt], err)
	}
	if claim.Status.Sandbox.Name != sb.Name() || sb.Namespace() != ns {
		t.Errorf("claim bound to %q, SDK opened %s/%s", claim.Status.Sandbox.Name, sb.Namespace(), sb.Name())
	}
	var sandbox sandboxv1beta1.Sandbox
	if err := env.Client.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: sb.Name()}, &sandbox); err != nil {
		t.Fatal(err)
	}
	if want := sandbox.Annotations[sandboxv1beta1.AnnotationPodName]; want != "" && sb.PodName() != want {
		t.Errorf("pod name %q; want the pod-name annotation's %q", sb.PodName(), want)
	}
	// Waiting was by watch, not polling: at most one watch each.
	t.Logf("watches: %d on claims, %d on sandboxes", watches("sandboxclaims"), watches("sandboxes"))
	if n, m := watches("sandboxclaims"), watches("sandboxes"); n > 1 || m > 1 {
		t.Errorf("%d claim watches and %d sandbox watches; want at most one each", n, m)
	}
	if res, err := sb.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}

	// Open finds the same sandbox by claim or by Sandbox name, and its
	// Close leaves the claim alone.
	for _, name := range []string{claim.Name, sb.Name()} {
		o, err := c.Open(ctx, ns, name)
		if err != nil {
			t.Fatalf("Open(%s): %v", name, err)
		}
		if o.Name() != sb.Name() || o.ClaimName() != claim.Name {
			t.Errorf("Open(%s) = sandbox %s of claim %q", name, o.Name(), o.ClaimName())
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(claims(t, ns)) != 1 {
		t.Fatal("closing an opened sandbox deleted its claim")
	}

	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := claims(t, ns); len(left) != 0 {
		t.Fatalf("claims after Close: %v", left)
	}
	if _, err := c.Open(ctx, ns, "no-such-thing"); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("Open(missing) = %v; want ErrNotFound", err)
	}
}

func TestCreateThatCannotOpenDeletesTheClaim(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	env.CreatePool(t, ns, "pool", 1)
	ctx := ctxFor(t)

	// Port-forward (the default) to a Pod envtest has no kubelet for: the
	// Sandbox gets Ready, connecting fails.
	c, err := sdk.New(env.Config, sdk.WithRetries(2, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := c.Create(ctx, ns, "pool"); err == nil {
		_ = sb.Close(ctx)
		t.Fatal("Create connected through a port-forward envtest cannot serve")
	} else if !strings.Contains(err.Error(), "port-forward") {
		t.Errorf("Create = %v; want the port-forward failure", err)
	} else {
		t.Logf("Create through port-forward on envtest: %v", err)
	}
	if left := claims(t, ns); len(left) != 0 {
		t.Errorf("claims left after a failed Create: %d", len(left))
	}

	// No such pool: the claim is never bound; the ready timeout ends the
	// wait, and the error says what the claim reported.
	c, err = sdk.New(env.Config, sdk.WithBaseURL(runtime(t).URL), sdk.WithReadyTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(ctx, ns, "no-such-pool")
	if !errors.Is(err, sdk.ErrTimeout) || !strings.Contains(err.Error(), "no sandbox bound") {
		t.Errorf("Create from a missing pool = %v; want ErrTimeout waiting for the claim", err)
	}
	t.Logf("Create from a missing pool: %v", err)
	if left := claims(t, ns); len(left) != 0 {
		t.Errorf("claims left after a timed-out Create: %d", len(left))
	}

	// A claim deleted while Create waits ends the wait at once.
	c, err = sdk.New(env.Config, sdk.WithBaseURL(runtime(t).URL))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			var list extv1beta1.SandboxClaimList
			if env.Client.List(ctx, &list, crclient.InNamespace(ns)) == nil && len(list.Items) > 0 {
				_ = env.Client.Delete(ctx, &list.Items[0])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	if _, err := c.Create(ctx, ns, "no-such-pool"); !errors.Is(err, sdk.ErrDeleted) || time.Since(start) > 30*time.Second {
		t.Errorf("Create whose claim is deleted = %v after %s; want ErrDeleted", err, time.Since(start))
	}
	if left := claims(t, ns); len(left) != 0 {
		t.Errorf("claims left: %d", len(left))
	}
}
