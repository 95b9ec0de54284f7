package runtime

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The requests below are shaped as upstream's SDKs send them (read from
// kubernetes-sigs/agent-sandbox clients/go/sandbox and
// clients/python/agentic-sandbox-client): the paths they build, their
// headers, their multipart framing and the JSON they decode.

// sdkEncode is how the upstream Go SDK puts a path in a URL: every byte
// outside A-Z a-z 0-9 - _ . ~ percent-encoded (upper-case hex, "/" too),
// and "." and ".." spelled %2E and %2E%2E.
func sdkEncode(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	switch b.String() {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return b.String()
}

// Upstream's Go SDK, legacy runtime: Write (buffered and streamed), Run,
// Read, List, Exists.
func TestUpstreamGoSDKRequests(t *testing.T) {
	s := newSandbox(t, Options{})
	if err := os.MkdirAll(filepath.Join(s.base, "data dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.write("data dir/r+d.csv", "a,b\n")

	// Write: CreateFormFile("file", base name), buffered, Content-Length set.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part, _ := mw.CreateFormFile("file", "script.txt")
	_, _ = part.Write([]byte("print('hi')\n"))
	_ = mw.Close()
	resp, body := s.do(http.MethodPost, "/upload", mw.FormDataContentType(), &buf)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("write: %d %s", resp.StatusCode, body)
	}

	// WriteReader: the same framing streamed, chunked, no Content-Length.
	pr, pw := io.Pipe()
	mw = multipart.NewWriter(pw)
	go func() {
		part, _ := mw.CreateFormFile("file", "streamed.bin")
		for i := 0; i < 64; i++ {
			_, _ = part.Write(bytes.Repeat([]byte{byte(i)}, 1024))
		}
		_ = pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/upload", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if resp, err := s.srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed write: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	if st, err := os.Stat(filepath.Join(s.base, "streamed.bin")); err != nil || st.Size() != 64*1024 {
		t.Errorf("the streamed upload: %v %v", st, err)
	}

	// Run: {"command": ...} as application/json; the SDK starts from exit -1.
	resp, body = s.do(http.MethodPost, "/execute", "application/json", strings.NewReader(`{"command":"cat script.txt"}`))
	run := struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}{ExitCode: -1}
	if err := json.Unmarshal(body, &run); err != nil || resp.StatusCode != http.StatusOK || run.Stdout != "print('hi')\n" || run.ExitCode != 0 {
		t.Errorf("run: %d %s (%v)", resp.StatusCode, body, err)
	}

	// Read.
	resp, body = s.get("/download/" + sdkEncode("data dir/r+d.csv"))
	if resp.StatusCode != http.StatusOK || string(body) != "a,b\n" {
		t.Errorf("read: %d %q", resp.StatusCode, body)
	}

	// List: the legacy entry shape, mod_time as float seconds.
	resp, body = s.get("/list/" + sdkEncode("."))
	var entries []struct {
		Name    string  `json:"name"`
		Size    int64   `json:"size"`
		Type    string  `json:"type"`
		ModTime float64 `json:"mod_time"`
	}
	if err := json.Unmarshal(body, &entries); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s (%v)", resp.StatusCode, body, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name+":"+e.Type)
		if e.ModTime < float64(time.Now().Add(-time.Hour).Unix()) {
			t.Errorf("list: %s has mod_time %f", e.Name, e.ModTime)
		}
	}
	if got := strings.Join(names, " "); got != "data dir:directory script.txt:file streamed.bin:file" {
		t.Errorf("list: %s", got)
	}

	// Exists.
	for p, want := range map[string]bool{"script.txt": true, "data dir/r+d.csv": true, "nope": false} {
		resp, body = s.get("/exists/" + sdkEncode(p))
		wantJSON(t, resp, body, http.StatusOK, ExistsResponse{Path: p, Exists: want})
	}
	// Escapes the SDK lets through (Read and List do not check paths).
	resp, body = s.get("/download/" + sdkEncode("../../etc/passwd"))
	wantJSON(t, resp, body, http.StatusForbidden, accessDenied)
	resp, body = s.get("/list/" + sdkEncode(".."))
	wantJSON(t, resp, body, http.StatusForbidden, accessDenied)
}

// Upstream's Python SDK (requests): urllib.parse.quote(path, safe=""),
// files={"file": (path, content)} with no part Content-Type, and the headers
// every call carries. Sent as raw bytes so nothing normalises them.
func TestUpstreamPythonSDKRequests(t *testing.T) {
	s := newSandbox(t, Options{})
	headers := "Host: sandbox\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate\r\n" +
		"Accept: */*\r\nConnection: keep-alive\r\nX-Request-ID: 6f1c0d9e\r\n" +
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
	multipartRaw := "--b5c6f0a1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\r\n" +
		"line one\nline two\n\r\n--b5c6f0a1--\r\n"
	resp, body := s.raw("POST /upload HTTP/1.1\r\n" + headers +
		fmt.Sprintf("Content-Length: %d\r\nContent-Type: multipart/form-data; boundary=b5c6f0a1\r\n\r\n", len(multipartRaw)) + multipartRaw)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"message":"File 'notes.txt' uploaded successfully."`) {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	cmd := `{"command": "wc -l notes.txt"}`
	resp, body = s.raw("POST /execute HTTP/1.1\r\n" + headers +
		fmt.Sprintf("Content-Length: %d\r\nContent-Type: application/json\r\n\r\n", len(cmd)) + cmd)
	if resp.StatusCode != http.StatusOK || body != `{"stdout":"2 notes.txt\n","stderr":"","exit_code":0}` {
		t.Errorf("execute: %d %q", resp.StatusCode, body)
	}
	for _, tc := range []struct{ path, want string }{
		{"/", `{"status":"ok","message":"Sandbox Runtime is active."}`},
		{"/download/notes.txt", "line one\nline two\n"},
		{"/exists/notes.txt", `{"path":"notes.txt","exists":true}`},
		{"/list/.", `"name":"notes.txt","size":18,"type":"file"`},
		{"/list/", `"name":"notes.txt","size":18,"type":"file"`},
	} {
		resp, body = s.raw("GET " + tc.path + " HTTP/1.1\r\n" + headers + "\r\n")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %q", tc.path, resp.StatusCode, body, tc.want)
		}
	}
	// What upstream's own runtime tests expect for a traversal.
	resp, body = s.raw("GET /download/..%2F..%2Fetc%2Fpasswd HTTP/1.1\r\n" + headers + "\r\n")
	if resp.StatusCode != http.StatusForbidden || body != `{"message":"Access denied"}` {
		t.Errorf("traversal: %d %q", resp.StatusCode, body)
	}
}

// raw sends one request exactly as written and reads the answer.
func (s *sandbox) raw(request string) (*http.Response, string) {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, string(data)
}

// rawGet sends a GET for a path no client would send unchanged.
func (s *sandbox) rawGet(path string) (*http.Response, string) {
	s.t.Helper()
	return s.raw("GET " + path + " HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n")
}

// TestFastAPIJSONBytes: JSON answers are FastAPI's JSONResponse bytes:
// compact, "<", ">", "&" and non-ASCII as themselves, no trailing newline.
func TestFastAPIJSONBytes(t *testing.T) {
	s := newSandbox(t, Options{})
	resp, body := s.do(http.MethodPost, "/execute", "application/json", strings.NewReader(`{"command":"echo \u003cb\u003e\u0026 café"}`))
	if want := `{"stdout":"<b>& café\n","stderr":"","exit_code":0}`; resp.StatusCode != http.StatusOK || string(body) != want {
		t.Errorf("execute: %d %q, want %q", resp.StatusCode, body, want)
	}
	if resp.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
		t.Errorf("Content-Length %s for a body of %d bytes", resp.Header.Get("Content-Length"), len(body))
	}
	resp, body = s.do(http.MethodGet, "/", "", nil)
	if want := `{"status":"ok","message":"Sandbox Runtime is active."}`; string(body) != want {
		t.Errorf("health: %d %q, want %q", resp.StatusCode, body, want)
	}
}
