package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

func TestLocalGuard(t *testing.T) {
	hosts, err := webguard.ParseHosts([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := LocalGuard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++ }), hosts, nil)
	for _, tc := range []struct {
		host, origin, fetchSite string
		ok                      bool
	}{
		{"127.0.0.1:8080", "", "", true},
		{"localhost:8080", "http://localhost:8080", "same-origin", true},
		{"[::1]:8080", "", "none", true},
		{"attacker.example:8080", "", "", false},
		{"attacker.example:8080", "http://attacker.example:8080", "same-origin", false},
		{"127.0.0.1:8080", "https://attacker.example", "", false},
		{"127.0.0.1:8080", "", "cross-site", false},
	} {
		reached = 0
		r := httptest.NewRequest(http.MethodPost, "/execute", strings.NewReader(`{"command":"id"}`))
		r.Host = tc.host
		r.Header.Set("X-Sandbox-ID", "sb")
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.fetchSite != "" {
			r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if tc.ok {
			if reached != 1 {
				t.Errorf("Host %s, Origin %q, Sec-Fetch-Site %q: refused (%d %s)", tc.host, tc.origin, tc.fetchSite, w.Code, w.Body)
			}
			continue
		}
		var body struct{ Detail string }
		if reached != 0 || w.Code != http.StatusForbidden || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Detail == "" {
			t.Errorf("Host %s, Origin %q, Sec-Fetch-Site %q: reached %d, %d %s; want 403 {\"detail\": ...}", tc.host, tc.origin, tc.fetchSite, reached, w.Code, w.Body)
		}
	}
}
