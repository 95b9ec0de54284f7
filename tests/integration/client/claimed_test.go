package client

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

// TestCreateTakesItsSandboxFromTheWatch: the controller labels the member
// a claim takes with the claim's UID before the claim's status names it,
// so Create finds its Sandbox in its watch of that label and sends no GET
// for it. Each handle is still pinned to its own Sandbox's UID. (A GET is
// allowed once in the four: the two watches are separate streams.)
func TestCreateTakesItsSandboxFromTheWatch(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	const creates = 4
	env.CreatePool(t, ns, "pool", creates)

	var mu sync.Mutex
	gets, labelWatches := 0, 0
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			mu.Lock()
			switch {
			case r.Method == http.MethodGet && q.Get("watch") != "true" && strings.Contains(r.URL.Path, "/sandboxes/"):
				gets++
			case q.Get("watch") == "true" && strings.HasSuffix(r.URL.Path, "/sandboxes") &&
				q.Get("labelSelector") != "" && strings.HasPrefix(q.Get("labelSelector"), sandboxv1beta1.LabelClaimUID+"="):
				labelWatches++
			}
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	// The runtime, as a router that records the UID each call is pinned
	// to.
	rt := runtime(t)
	var pinned []string
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pinned = append(pinned, r.Header.Get(sdk.HeaderSandboxUID))
		mu.Unlock()
		rt.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(router.Close)
	c, err := sdk.New(cfg, sdk.WithRouter(router.URL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	for i := range creates {
		sb, err := c.Create(ctx, ns, "pool")
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		var want sandboxv1beta1.Sandbox
		if err := env.Client.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: sb.Name()}, &want); err != nil {
			t.Fatal(err)
		}
		if res, err := sb.Run(ctx, "echo hi"); err != nil || res.Stdout != "hi\n" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		mu.Lock()
		last := pinned[len(pinned)-1]
		mu.Unlock()
		if last != string(want.UID) {
			t.Errorf("Create %d: the call carried UID %q; want its Sandbox's %q", i, last, want.UID)
		}
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d Creates: %d GETs of a Sandbox, %d watches by the claim-uid label", creates, gets, labelWatches)
	if labelWatches != creates {
		t.Errorf("%d watches by the claim-uid label; want one per Create (%d)", labelWatches, creates)
	}
	if gets > 1 {
		t.Errorf("%d GETs of a Sandbox in %d Creates; want at most 1 (the claim-uid label's watch gives it)", gets, creates)
	}
}
