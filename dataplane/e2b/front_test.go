package e2b

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFrontKeepsUpstreamRouterContract checks that --e2b adds the E2B
// paths and header without changing what upstream's router contract
// answers: a request missing X-Sandbox-ID outside the E2B API's paths still
// reaches the legacy handler (which answers upstream's 400).
func TestFrontKeepsUpstreamRouterContract(t *testing.T) {
	legacy := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	front := New(Options{}).Front(legacy)
	cases := []struct {
		method, path string
		header       map[string]string
		want         int
		body         string
	}{
		{"GET", "/", nil, http.StatusTeapot, ""},
		{"POST", "/execute", nil, http.StatusTeapot, ""},
		{"GET", "/healthz", nil, http.StatusTeapot, ""},
		{"GET", "/sandboxesque", nil, http.StatusTeapot, ""},
		{"POST", "/v2/sandboxes", map[string]string{"X-Sandbox-ID": "sb"}, http.StatusTeapot, ""},
		{"GET", "/sandboxes/files", map[string]string{"X-Sandbox-Claim-UID": "claim-uid"}, http.StatusTeapot, ""},
		{"GET", "/v2/sandboxes/x/unknown", nil, http.StatusNotFound, "is not part of the E2B API"},
		{"GET", "/sandboxes/x/unknown/more", nil, http.StatusNotFound, "is not part of the E2B API"},
		{"POST", "/process.Process/Start", map[string]string{HeaderSandboxID: "../etc"}, http.StatusBadRequest, "invalid E2b-Sandbox-Id"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.path, nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		front.ServeHTTP(w, r)
		if w.Code != c.want || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s %s %v: %d %q, want %d containing %q", c.method, c.path, c.header, w.Code, w.Body.String(), c.want, c.body)
		}
	}
}
