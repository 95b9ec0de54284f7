package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWatchedResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                                              "pods",
		"/api/v1/namespaces/team-a/pods":                            "pods",
		"/api/v1/namespaces":                                        "namespaces",
		"/apis/agents.x-k8s.io/v1beta1/sandboxes":                   "sandboxes.agents.x-k8s.io",
		"/apis/agents.x-k8s.io/v1beta1/namespaces/team-a/sandboxes": "sandboxes.agents.x-k8s.io",
		"/apis/node.k8s.io/v1/runtimeclasses":                       "runtimeclasses.node.k8s.io",
		"/healthz":                                                  Other,
		"/apis/agents.x-k8s.io/v1beta1":                             Other,
		"/":                                                         Other,
	} {
		if got := WatchedResource(path); got != want {
			t.Errorf("WatchedResource(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestCountWatches checks that watches are counted and reads, lists and
// writes are not, and that every request still reaches the next transport.
func TestCountWatches(t *testing.T) {
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	defer srv.Close()
	client := &http.Client{Transport: CountWatches(http.DefaultTransport)}
	pods := Watches.WithLabelValues("pods")
	before := testutil.ToFloat64(pods)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/a/pods?watch=true&resourceVersion=5"},
		{http.MethodGet, "/api/v1/pods?watch=1"},
		{http.MethodGet, "/api/v1/pods?watch=false"},
		{http.MethodGet, "/api/v1/namespaces/a/pods"},
		{http.MethodGet, "/api/v1/namespaces/a/pods/p"},
		{http.MethodPatch, "/api/v1/namespaces/a/pods/p?watch=true"},
	} {
		req, err := http.NewRequest(r.method, srv.URL+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if got := testutil.ToFloat64(pods) - before; got != 2 {
		t.Errorf("watches of pods counted: %v, want 2", got)
	}
	if served != 6 {
		t.Errorf("requests served: %d, want 6", served)
	}
}
