package conformance

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// TestLegacyThroughRouter replays upstream's Go SDK in direct mode (APIURL
// = the router) and the Python SDK's direct connection: the legacy
// protocol through the host router, byte for byte, against a sandbox
// claimed from the sample warm pool. The runtime's answers are upstream's
// (FastAPI's compact JSON, no trailing newline), the router's own are
// {"detail": ...}.
func TestLegacyThroughRouter(t *testing.T) {
	c := claimSandbox(t)
	addr := hostPort(t, suite.RouterURL)
	ns, id := c.Namespace, c.Sandbox
	goReq := func(method, target, contentType string, body []byte) Wire {
		return Wire{Method: method, Target: target, Headers: goSDKHeaders(id, ns, contentType, body, "60"), Body: body}
	}
	pyReq := func(method, target, contentType string, body []byte) Wire {
		return Wire{Method: method, Target: target, Headers: pythonSDKHeaders(id, ns, contentType, body), Body: body}
	}

	// The router's own health.
	r := send(t, addr, Wire{Method: http.MethodGet, Target: "/healthz", Headers: goSDKHeaders("", "", "", nil, "")})
	expect(t, "GET /healthz", r, http.StatusOK, map[string]string{"Content-Type": "application/json"}, `{"status":"ok"}`)

	// Open -> first command: the SDK's first call may meet a runtime
	// still starting (the router answers 502, which the SDK retries).
	begin := time.Now()
	eventually(t, time.Minute, "the first GET / through the router", func() error {
		r, err := trySend(addr, goReq(http.MethodGet, "/", "", nil))
		if err == nil && r.Status != http.StatusOK {
			err = errStatus
		}
		return err
	})
	t.Logf("legacy through the router: open %s, open -> first command answered %s",
		c.Opened.Round(time.Millisecond), (c.Opened + time.Since(begin)).Round(time.Millisecond))

	health := `{"status":"ok","message":"Sandbox Runtime is active."}`
	expect(t, "GET / (Go SDK)", send(t, addr, goReq(http.MethodGet, "/", "", nil)), http.StatusOK,
		map[string]string{"Content-Type": "application/json"}, health)
	expect(t, "GET / (Python SDK)", send(t, addr, pyReq(http.MethodGet, "/", "", nil)), http.StatusOK, nil, health)

	// POST /execute: Go's json.Marshal (compact, HTML characters escaped)
	// and Python's json.dumps (", " and ": ").
	for _, tc := range []struct {
		what string
		w    Wire
		want string
	}{
		{"echo hi (Go)", goReq(http.MethodPost, "/execute", "application/json", []byte(`{"command":"echo hi"}`)),
			`{"stdout":"hi\n","stderr":"","exit_code":0}`},
		{"echo hi (Python)", pyReq(http.MethodPost, "/execute", "application/json", []byte(`{"command": "echo hi"}`)),
			`{"stdout":"hi\n","stderr":"","exit_code":0}`},
		{"stderr and exit 3", goReq(http.MethodPost, "/execute", "application/json",
			[]byte(`{"command":"sh -c \"echo out; echo err \u003e\u00262; exit 3\""}`)),
			`{"stdout":"out\n","stderr":"err\n","exit_code":3}`},
		{"no shell: | and $HOME are arguments", goReq(http.MethodPost, "/execute", "application/json",
			[]byte(`{"command":"echo a | b $HOME"}`)),
			`{"stdout":"a | b $HOME\n","stderr":"","exit_code":0}`},
		{"HTML and non-ASCII output unescaped", goReq(http.MethodPost, "/execute", "application/json",
			[]byte(`{"command":"echo \u003cb\u003e\u0026 caf\u00e9"}`)),
			`{"stdout":"<b>& café\n","stderr":"","exit_code":0}`},
	} {
		expect(t, "POST /execute "+tc.what, send(t, addr, tc.w), http.StatusOK, map[string]string{"Content-Type": "application/json"}, tc.want)
	}
	// A program that cannot start: 200 with exit_code 1 and the reason in stderr.
	r = send(t, addr, goReq(http.MethodPost, "/execute", "application/json", []byte(`{"command":"no-such-program-here"}`)))
	var failed struct {
		Stdout   *string `json:"stdout"`
		Stderr   string  `json:"stderr"`
		ExitCode *int    `json:"exit_code"`
	}
	if err := json.Unmarshal(r.Body, &failed); err != nil || r.Status != http.StatusOK || failed.ExitCode == nil || *failed.ExitCode != 1 ||
		failed.Stdout == nil || *failed.Stdout != "" || !regexp.MustCompile(`^Failed to execute command: `).MatchString(failed.Stderr) {
		t.Errorf("POST /execute of a missing program: %d %s; want 200, exit_code 1, stderr \"Failed to execute command: ...\"", r.Status, r.Body)
	}

	// POST /upload: the Go SDK's buffered multipart, its streamed one
	// (chunked), and the Python SDK's.
	content := []byte("replayed\n")
	const boundary = "7f4c2a0d9e1b3c5a7f4c2a0d9e1b3c5a7f4c2a0d9e1b3c5a7f4c2a0d9e1b"
	uploads := []struct {
		what string
		w    Wire
		name string
	}{
		{"Go buffered", goReq(http.MethodPost, "/upload", "multipart/form-data; boundary="+boundary, goMultipart(boundary, "data.txt", content)), "data.txt"},
		{"Python", pyReq(http.MethodPost, "/upload", "multipart/form-data; boundary="+boundary, pythonMultipart(boundary, "py.txt", content)), "py.txt"},
	}
	streamed := goMultipart(boundary, "streamed.txt", content)
	uploads = append(uploads, struct {
		what string
		w    Wire
		name string
	}{"Go streamed", Wire{Method: http.MethodPost, Target: "/upload", Chunked: true, Body: streamed,
		Headers: goSDKHeaders(id, ns, "multipart/form-data; boundary="+boundary, nil, "60")}, "streamed.txt"})
	for _, u := range uploads {
		expect(t, "POST /upload "+u.what, send(t, addr, u.w), http.StatusOK, map[string]string{"Content-Type": "application/json"},
			`{"message":"File '`+u.name+`' uploaded successfully."}`)
	}
	for _, cmd := range []string{`{"command":"mkdir -p sub"}`, `{"command":"cp data.txt sub/data.txt"}`} {
		expect(t, "POST /execute "+cmd, send(t, addr, goReq(http.MethodPost, "/execute", "application/json", []byte(cmd))),
			http.StatusOK, nil, `{"stdout":"","stderr":"","exit_code":0}`)
	}

	// GET /download/{path}: "/" percent-encoded as %2F.
	for _, target := range []string{"/download/data.txt", "/download/sub%2Fdata.txt", "/download/streamed.txt", "/download/py.txt"} {
		expect(t, "GET "+target, send(t, addr, goReq(http.MethodGet, target, "", nil)), http.StatusOK,
			map[string]string{"Content-Type": "application/octet-stream", "Content-Length": "9"}, string(content))
	}
	expect(t, "GET /download/missing.txt", send(t, addr, goReq(http.MethodGet, "/download/missing.txt", "", nil)),
		http.StatusNotFound, map[string]string{"Content-Type": "application/json"}, `{"message":"File not found"}`)

	// GET /list/{path}: mod_time is a float of seconds.
	r = send(t, addr, goReq(http.MethodGet, "/list/sub", "", nil))
	listing := regexp.MustCompile(`^\[\{"name":"data\.txt","size":9,"type":"file","mod_time":[0-9]+(\.[0-9]+)?\}\]$`)
	if r.Status != http.StatusOK || !listing.Match(r.Body) {
		t.Errorf("GET /list/sub: %d %s; want 200 %s", r.Status, r.Body, listing)
	}

	// GET /exists/{path}.
	expect(t, "GET /exists/sub%2Fdata.txt", send(t, addr, goReq(http.MethodGet, "/exists/sub%2Fdata.txt", "", nil)),
		http.StatusOK, nil, `{"path":"sub/data.txt","exists":true}`)
	expect(t, "GET /exists/sub%2Fmissing.txt", send(t, addr, pyReq(http.MethodGet, "/exists/sub%2Fmissing.txt", "", nil)),
		http.StatusOK, nil, `{"path":"sub/missing.txt","exists":false}`)

	// Escapes: 403 {"message": "Access denied"}, on every file call.
	for _, target := range []string{"/download/..%2F..%2Fetc%2Fpasswd", "/list/%2E%2E", "/exists/..%2Foutside"} {
		expect(t, "GET "+target, send(t, addr, goReq(http.MethodGet, target, "", nil)), http.StatusForbidden,
			map[string]string{"Content-Type": "application/json"}, `{"message":"Access denied"}`)
	}
	escape := goMultipart(boundary, "../escape.txt", content)
	expect(t, "POST /upload ../escape.txt", send(t, addr, goReq(http.MethodPost, "/upload", "multipart/form-data; boundary="+boundary, escape)),
		http.StatusForbidden, nil, `{"message":"Access denied"}`)
}

// TestRouterRefusals: the router's own answers, in upstream's {"detail":
// ...} shape: 400 for missing or malformed routing headers, 502 when the
// sandbox's port answers nothing.
func TestRouterRefusals(t *testing.T) {
	c := claimSandbox(t)
	addr := hostPort(t, suite.RouterURL)
	for _, tc := range []struct {
		what    string
		headers []string
		status  int
		body    string
	}{
		{"no X-Sandbox-ID", goSDKHeaders("", "", "", nil, ""), http.StatusBadRequest, `{"detail":"X-Sandbox-ID header is required."}`},
		{"a sandbox ID that is no DNS label", goSDKHeaders("Not_A_Name", c.Namespace, "", nil, ""), http.StatusBadRequest, `{"detail":"Invalid sandbox ID format."}`},
		{"a bad namespace", goSDKHeaders(c.Sandbox, "Bad_NS", "", nil, ""), http.StatusBadRequest, `{"detail":"Invalid namespace format."}`},
		{"a bad port", []string{"X-Sandbox-Id: " + c.Sandbox, "X-Sandbox-Namespace: " + c.Namespace, "X-Sandbox-Port: eighty"},
			http.StatusBadRequest, `{"detail":"Invalid port format."}`},
		{"a port nothing listens on", []string{"X-Sandbox-Id: " + c.Sandbox, "X-Sandbox-Namespace: " + c.Namespace, "X-Sandbox-Port: 1"},
			http.StatusBadGateway, `{"detail":"Could not connect to the backend sandbox: ` + c.Sandbox + `"}`},
	} {
		r := send(t, addr, Wire{Method: http.MethodGet, Target: "/", Headers: tc.headers})
		expect(t, tc.what, r, tc.status, map[string]string{"Content-Type": "application/json"}, tc.body)
	}
}

// TestLegacyTimeout: a command that outlives SANDBOX_EXEC_TIMEOUT_SECONDS
// (here 1, injected by the claim) is killed and answered as upstream's
// runtime answers every failure: 200 with exit_code 1 and the reason in
// stderr.
func TestLegacyTimeout(t *testing.T) {
	c := claimSandbox(t, extv1beta1.EnvVar{Name: "SANDBOX_EXEC_TIMEOUT_SECONDS", Value: "1"})
	addr := hostPort(t, suite.RouterURL)
	body := []byte(`{"command":"sh -c \"echo started; sleep 30\""}`)
	w := Wire{Method: http.MethodPost, Target: "/execute", Headers: goSDKHeaders(c.Sandbox, c.Namespace, "application/json", body, "60"), Body: body}
	var r Reply
	eventually(t, time.Minute, "the runtime answering through the router", func() error {
		var err error
		if r, err = trySend(addr, w); err == nil && r.Status == http.StatusBadGateway {
			err = errStatus
		}
		return err
	})
	var res struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || r.Status != http.StatusOK || res.ExitCode != 1 || res.Stderr == "" {
		t.Fatalf("POST /execute past the timeout: %d %s; want 200 with exit_code 1 and a reason in stderr", r.Status, r.Body)
	}
	t.Logf("timed out: %s", r.Body)
}
