package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

const testToken = "s3cr3t-runtime-token"

// send sends one raw request with exactly these headers (and a
// Content-Length for the body) and returns the status and the body.
func (s *sandbox) send(method, path string, headers map[string]string, body string) (int, string) {
	s.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, path)
	if _, ok := headers["Host"]; !ok {
		b.WriteString("Host: 127.0.0.1\r\n")
	}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\r\n", k, headers[k])
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	resp, out := s.raw(b.String())
	return resp.StatusCode, out
}

func jsonHeaders(extra ...string) map[string]string {
	h := map[string]string{"Content-Type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// With a token, every request but the health checks needs it, in the
// protocol's error shape; the command of a refused request never runs.
func TestTokenRequired(t *testing.T) {
	s := newSandbox(t, Options{AuthToken: testToken})
	s.write("a.txt", "data")
	touch := `{"command": "touch ran"}`
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		body               string
	}{
		{"no token", http.MethodPost, "/execute", jsonHeaders(), touch},
		{"wrong token", http.MethodPost, "/execute", jsonHeaders(TokenHeader, "s3cr3t-runtime-tokem"), touch},
		{"a prefix of the token", http.MethodPost, "/execute", jsonHeaders(TokenHeader, testToken[:5]), touch},
		{"the token with more", http.MethodPost, "/execute", jsonHeaders(TokenHeader, testToken+"x"), touch},
		{"token as a bearer", http.MethodPost, "/execute", jsonHeaders("Authorization", "Bearer "+testToken), touch},
		{"download", http.MethodGet, "/download/a.txt", nil, ""},
		{"list", http.MethodGet, "/list/.", nil, ""},
		{"exists", http.MethodGet, "/exists/a.txt", nil, ""},
		{"unknown route", http.MethodGet, "/nope", nil, ""},
	} {
		status, body := s.send(tc.method, tc.path, tc.headers, tc.body)
		if status != http.StatusUnauthorized || !strings.HasPrefix(body, `{"message":"Missing or wrong X-Sandbox-Runtime-Token`) {
			t.Errorf("%s: %d %s, want 401 {\"message\": ...}", tc.name, status, body)
		}
	}
	if _, err := os.Stat(filepath.Join(s.base, "ran")); !os.IsNotExist(err) {
		t.Errorf("a refused /execute ran its command (%v)", err)
	}
	// sandboxd's paths answer in sandboxd's shape.
	status, body := s.send(http.MethodGet, "/v1/files/a.txt", nil, "")
	if status != http.StatusUnauthorized || !strings.HasPrefix(body, `{"code":"UNAUTHENTICATED","message":"Missing or wrong`) {
		t.Errorf("/v1/files without a token: %d %s", status, body)
	}
	// Health checks need none (kubelet probes, the stand-in's readiness).
	if status, body := s.send(http.MethodGet, "/", nil, ""); status != http.StatusOK {
		t.Errorf("GET / without a token: %d %s", status, body)
	}
	if status, body := s.send(http.MethodGet, "/v1/health", nil, ""); status == http.StatusUnauthorized {
		t.Errorf("GET /v1/health without a token: %d %s", status, body)
	}
	if status, body := s.send(http.MethodPost, "/", nil, ""); status != http.StatusUnauthorized {
		t.Errorf("POST / without a token: %d %s, want 401", status, body)
	}
	// The right token.
	status, body = s.send(http.MethodPost, "/execute", jsonHeaders(TokenHeader, testToken), touch)
	if status != http.StatusOK || !strings.Contains(body, `"exit_code":0`) {
		t.Errorf("with the token: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(s.base, "ran")); err != nil {
		t.Errorf("the command with the token did not run: %v", err)
	}
	if status, body := s.send(http.MethodGet, "/download/a.txt", map[string]string{TokenHeader: testToken}, ""); status != http.StatusOK || body != "data" {
		t.Errorf("download with the token: %d %s", status, body)
	}
}

// Without a token configured, nothing changes: no header needed.
func TestNoTokenConfigured(t *testing.T) {
	s := newSandbox(t, Options{})
	status, body := s.send(http.MethodPost, "/execute", jsonHeaders(), `{"command": "echo hi"}`)
	if status != http.StatusOK || !strings.Contains(body, `"stdout":"hi\n"`) {
		t.Errorf("%d %s", status, body)
	}
}

// The commands never see the token, whatever the runtime's environment
// holds; the rest of the environment reaches them.
func TestTokenNotInCommandEnvironment(t *testing.T) {
	t.Setenv(TokenEnv, testToken)
	t.Setenv("RUNTIME_TEST_MARKER", "visible")
	s := newSandbox(t, Options{AuthToken: testToken})
	status, body := s.send(http.MethodPost, "/execute", jsonHeaders(TokenHeader, testToken), `{"command": "env"}`)
	var res ExecuteResponse
	if err := json.Unmarshal([]byte(body), &res); err != nil || status != http.StatusOK || res.ExitCode != 0 {
		t.Fatalf("env: %d %s (%v)", status, body, err)
	}
	if strings.Contains(res.Stdout, testToken) || strings.Contains(res.Stdout, TokenEnv) {
		t.Errorf("a command's environment holds the token:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "RUNTIME_TEST_MARKER=visible") {
		t.Errorf("a command's environment lost the runtime's other variables:\n%s", res.Stdout)
	}
}

// With AllowedHosts, a Host that names another machine (DNS rebinding) is
// refused; loopback names and IP addresses (Pod IPs, as the router's
// port-forward sends them) are served. Without it, any Host is.
func TestAllowedHosts(t *testing.T) {
	hosts, err := webguard.ParseHosts(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, Options{AllowedHosts: hosts})
	for _, host := range []string{"attacker.example", "attacker.example:8888", "localhost.attacker.example", "sandbox"} {
		status, body := s.send(http.MethodPost, "/execute", jsonHeaders("Host", host), `{"command": "touch ran"}`)
		if status != http.StatusForbidden || !strings.Contains(body, `is not allowed`) {
			t.Errorf("Host %s: %d %s, want 403", host, status, body)
		}
		if status, _ := s.send(http.MethodGet, "/", map[string]string{"Host": host}, ""); status != http.StatusForbidden {
			t.Errorf("GET / with Host %s: %d, want 403", host, status)
		}
	}
	if _, err := os.Stat(filepath.Join(s.base, "ran")); !os.IsNotExist(err) {
		t.Errorf("a refused /execute ran its command (%v)", err)
	}
	for _, host := range []string{"localhost", "localhost:8888", "127.0.0.1:40123", "[::1]:8888", "10.0.0.7:8888"} {
		status, body := s.send(http.MethodPost, "/execute", jsonHeaders("Host", host), `{"command": "echo hi"}`)
		if status != http.StatusOK || !strings.Contains(body, `"stdout":"hi\n"`) {
			t.Errorf("Host %s: %d %s, want 200", host, status, body)
		}
	}
	open := newSandbox(t, Options{})
	if status, body := open.send(http.MethodPost, "/execute", jsonHeaders("Host", "sandbox-a.default.svc"), `{"command": "echo hi"}`); status != http.StatusOK {
		t.Errorf("no AllowedHosts, Host sandbox-a.default.svc: %d %s", status, body)
	}
}

// A page of another site cannot make the browser run a command: a foreign
// Origin, Sec-Fetch-Site: cross-site and a body not sent as JSON are
// refused, with or without the other options.
func TestCrossSiteRefused(t *testing.T) {
	s := newSandbox(t, Options{})
	cmd := `{"command": "touch ran"}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"foreign Origin", jsonHeaders("Origin", "https://attacker.example"), http.StatusForbidden},
		{"another local origin", jsonHeaders("Origin", "http://127.0.0.1:3000", "Host", "127.0.0.1:8888"), http.StatusForbidden},
		{"opaque Origin", jsonHeaders("Origin", "null"), http.StatusForbidden},
		{"cross-site fetch", jsonHeaders("Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, http.StatusUnprocessableEntity},
		{"a form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnprocessableEntity},
		{"multipart", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusUnprocessableEntity},
		{"no Content-Type", map[string]string{}, http.StatusUnprocessableEntity},
	} {
		status, body := s.send(http.MethodPost, "/execute", tc.headers, cmd)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
	}
	status, body := s.send(http.MethodPost, "/execute", map[string]string{"Content-Type": "text/plain"}, cmd)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `{"detail":[{"loc":["body"],`) || !strings.Contains(body, `"type":"model_attributes_type"`) {
		t.Errorf("text/plain: %d %s, want FastAPI's 422", status, body)
	}
	// Uploads stay multipart, but not from another origin.
	up := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n\r\nx\r\n--b--\r\n"
	status, body = s.send(http.MethodPost, "/upload",
		map[string]string{"Content-Type": "multipart/form-data; boundary=b", "Origin": "https://attacker.example"}, up)
	if status != http.StatusForbidden {
		t.Errorf("upload from a foreign origin: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(s.base, "ran")); !os.IsNotExist(err) {
		t.Errorf("a refused /execute ran its command (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(s.base, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused upload wrote its file (%v)", err)
	}
	// The runtime's own origin, and a same-origin fetch, are served.
	status, body = s.send(http.MethodPost, "/execute",
		jsonHeaders("Host", "localhost:8888", "Origin", "http://localhost:8888", "Sec-Fetch-Site", "same-origin"), `{"command": "echo hi"}`)
	if status != http.StatusOK {
		t.Errorf("same origin: %d %s", status, body)
	}
}

// Upstream's SDKs, through a router that sends the token and a Pod IP as
// Host, work against a runtime with every check on.
func TestUpstreamSDKRequestsWithGuards(t *testing.T) {
	hosts, err := webguard.ParseHosts(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, Options{AuthToken: testToken, AllowedHosts: hosts})
	// As upstream's Python SDK (requests) sends them, after the router.
	headers := "Host: 10.0.0.7:8888\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate\r\n" +
		"Accept: */*\r\nConnection: keep-alive\r\nX-Request-ID: 6f1c0d9e\r\n" + TokenHeader + ": " + testToken + "\r\n"
	up := "--b5c6f0a1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\r\nline one\nline two\n\r\n--b5c6f0a1--\r\n"
	resp, body := s.raw("POST /upload HTTP/1.1\r\n" + headers +
		fmt.Sprintf("Content-Length: %d\r\nContent-Type: multipart/form-data; boundary=b5c6f0a1\r\n\r\n", len(up)) + up)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	cmd := `{"command": "wc -l notes.txt"}`
	resp, body = s.raw("POST /execute HTTP/1.1\r\n" + headers +
		fmt.Sprintf("Content-Length: %d\r\nContent-Type: application/json\r\n\r\n", len(cmd)) + cmd)
	if resp.StatusCode != http.StatusOK || body != `{"stdout":"2 notes.txt\n","stderr":"","exit_code":0}`+"\n" {
		t.Errorf("execute: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"/download/notes.txt", "/exists/notes.txt", "/list/."} {
		if resp, body := s.raw("GET " + p + " HTTP/1.1\r\n" + headers + "\r\n"); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	// As upstream's Go SDK sends /execute (Go's client: Host, User-Agent,
	// Content-Length, Content-Type, Accept-Encoding).
	status, out := s.send(http.MethodPost, "/execute",
		jsonHeaders("Host", "10.0.0.7:8888", "User-Agent", "Go-http-client/1.1", "Accept-Encoding", "gzip", TokenHeader, testToken), `{"command":"cat notes.txt"}`)
	if status != http.StatusOK || !strings.Contains(out, `"stdout":"line one\nline two\n"`) {
		t.Errorf("Go SDK execute: %d %s", status, out)
	}
}

// GuardWithHealth opens only its own health path (GET or HEAD) without the
// token: not /v1/health, not a POST to the health path, not a look-alike.
func TestGuardWithHealth(t *testing.T) {
	const token = "tok"
	h := GuardWithHealth(Options{AuthToken: token, BaseDir: t.TempDir()}, "/health")(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{http.MethodGet, "/health", "", http.StatusTeapot},
		{http.MethodHead, "/health", "", http.StatusTeapot},
		{http.MethodPost, "/health", "", http.StatusUnauthorized},
		{http.MethodGet, "/health/", "", http.StatusUnauthorized},
		{http.MethodGet, "/%68ealth", "", http.StatusUnauthorized},
		{http.MethodGet, "/v1/health", "", http.StatusUnauthorized},
		{http.MethodPost, "/process.Process/List", "", http.StatusUnauthorized},
		{http.MethodPost, "/process.Process/List", "wrong", http.StatusUnauthorized},
		{http.MethodPost, "/process.Process/List", token, http.StatusTeapot},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.token != "" {
			req.Header.Set(TokenHeader, c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s (token %q): %d, want %d", c.method, c.path, c.token, rec.Code, c.want)
		}
	}
}
