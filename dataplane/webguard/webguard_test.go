package webguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHosts(t *testing.T) {
	h, err := ParseHosts([]string{"Sandbox.Local.", " ", "[fd00::5]"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8080": true, "localhost.:8080": true, "127.0.0.1": true, "127.0.0.1:8888": true,
		"[::1]": true, "[::1]:8888": true, "::1": true,
		"sandbox.local": true, "sandbox.local:80": true,
		// Any IP address: a browser sends one only to that address.
		"10.0.0.5:8888": true, "[fd00::7]:8080": true, "0.0.0.0:8080": true,
		// Names of other machines, which DNS rebinding sends.
		"attacker.example": false, "attacker.example:8080": false, "localhost.attacker.example": false,
		"127.0.0.1.nip.io:8080": false, "": false, "[::1": false, "sandbox": false,
	} {
		if got := h.Allowed(host); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", host, got, want)
		}
	}
	var none *Hosts
	if !none.Allowed("localhost:1") || none.Allowed("sandbox.local") || !none.Allowed("10.1.2.3") {
		t.Error("a nil Hosts accepts loopback names and IP addresses only")
	}
	if _, err := ParseHosts([]string{"http://x", "a:80", "a b", "ok"}); err == nil ||
		!strings.Contains(err.Error(), `"http://x"`) || !strings.Contains(err.Error(), `"a:80"`) || !strings.Contains(err.Error(), `"a b"`) ||
		strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("ParseHosts of bad names: %v", err)
	}
}

func TestCrossSite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		headers map[string]string
		refused bool
	}{
		{"a program (no browser headers)", "127.0.0.1:8080", nil, false},
		{"own origin", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080"}, false},
		{"own origin, https and other case", "LocalHost:8080", map[string]string{"Origin": "https://localhost:8080"}, false},
		{"typed in the address bar", "localhost:8080", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"same origin fetch", "localhost:8080", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost:8080"}, false},
		{"foreign origin", "127.0.0.1:8080", map[string]string{"Origin": "https://attacker.example"}, true},
		{"another local port", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:3000"}, true},
		{"opaque origin", "127.0.0.1:8080", map[string]string{"Origin": "null"}, true},
		{"file origin", "127.0.0.1:8080", map[string]string{"Origin": "file://"}, true},
		{"cross-site without Origin", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"cross-site, own Origin spoofed", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "Cross-Site", "Origin": "http://127.0.0.1:8080"}, true},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/execute", nil)
		r.Host = tc.host
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got := CrossSite(r); (got != "") != tc.refused {
			t.Errorf("%s: CrossSite = %q, want refused %v", tc.name, got, tc.refused)
		}
	}
}

func TestJSON(t *testing.T) {
	json := []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"}
	notJSON := []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonx", "text/json", "application/json;;"}
	for _, tc := range []struct {
		types []string
		want  bool
	}{{json, true}, {notJSON, false}} {
		for _, ct := range tc.types {
			r := httptest.NewRequest(http.MethodPost, "/execute", nil)
			if ct != "" {
				r.Header.Set("Content-Type", ct)
			}
			if got := JSON(r); got != tc.want {
				t.Errorf("JSON(%q) = %v, want %v", ct, got, tc.want)
			}
		}
	}
}
