package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCountWatches checks that watches are counted and reads, lists and
// writes are not, and that every request still reaches the next transport.
func TestCountWatches(t *testing.T) {
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	defer srv.Close()
	client := &http.Client{Transport: CountWatches(http.DefaultTransport)}
	pods, sandboxes := Watches.WithLabelValues("pods"), Watches.WithLabelValues("sandboxes.agents.x-k8s.io")
	before, beforeSandboxes := testutil.ToFloat64(pods), testutil.ToFloat64(sandboxes)
	requests := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/a/pods?watch=true&resourceVersion=5"},
		{http.MethodGet, "/api/v1/pods?watch=1"},
		{http.MethodGet, "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes?watch=true"},
		{http.MethodGet, "/api/v1/pods?watch=false"},
		{http.MethodGet, "/api/v1/namespaces/a/pods"},
		{http.MethodGet, "/api/v1/namespaces/a/pods/p"},
		{http.MethodGet, "/api/v1/namespaces/a/pods/watch?labelSelector=x"},
		{http.MethodGet, "/healthz?watch=true"},
		{http.MethodPatch, "/api/v1/namespaces/a/pods/p?watch=true"},
	}
	for _, r := range requests {
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
	if got := testutil.ToFloat64(sandboxes) - beforeSandboxes; got != 1 {
		t.Errorf("watches of sandboxes counted: %v, want 1", got)
	}
	if served != len(requests) {
		t.Errorf("requests served: %d, want %d", served, len(requests))
	}
}
