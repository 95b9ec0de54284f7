package runtime

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sandbox is a runtime on a real HTTP server over a fresh base directory.
type sandbox struct {
	t    *testing.T
	base string
	srv  *httptest.Server
}

func newSandbox(t *testing.T, opts Options) *sandbox {
	t.Helper()
	// The base directory sits one level down, so tests can put files
	// "outside" it that a confinement bug would reach.
	root := t.TempDir()
	base := filepath.Join(root, "app")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.BaseDir = base
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return &sandbox{t: t, base: base, srv: srv}
}

// outside is a directory next to the base directory.
func (s *sandbox) outside() string {
	dir := filepath.Join(filepath.Dir(s.base), "outside")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	return dir
}

func (s *sandbox) write(rel, content string) string {
	s.t.Helper()
	p := filepath.Join(s.base, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *sandbox) symlink(target, rel string) {
	s.t.Helper()
	if err := os.Symlink(target, filepath.Join(s.base, rel)); err != nil {
		s.t.Fatal(err)
	}
}

// do sends a request whose path is sent exactly as escapedPath spells it.
func (s *sandbox) do(method, escapedPath, contentType string, body io.Reader) (*http.Response, []byte) {
	s.t.Helper()
	u, err := url.Parse(s.srv.URL + escapedPath)
	if err != nil {
		s.t.Fatal(err)
	}
	if got := u.EscapedPath(); got != escapedPath {
		s.t.Fatalf("the client would send %q, not %q", got, escapedPath)
	}
	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		s.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, data
}

func (s *sandbox) get(escapedPath string) (*http.Response, []byte) {
	s.t.Helper()
	return s.do(http.MethodGet, escapedPath, "", nil)
}

// wantJSON checks a response's status and that its body is the JSON of want.
func wantJSON(t *testing.T, resp *http.Response, body []byte, status int, want any) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.EscapedPath(), resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", resp.Request.URL.EscapedPath(), ct)
	}
	var got, wantV any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", resp.Request.URL.EscapedPath(), body, err)
	}
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &wantV); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantV, got); diff != "" {
		t.Errorf("%s %s: body (-want +got):\n%s", resp.Request.Method, resp.Request.URL.EscapedPath(), diff)
	}
}

var accessDenied = map[string]string{"message": "Access denied"}

func TestHealth(t *testing.T) {
	s := newSandbox(t, Options{})
	resp, body := s.get("/")
	wantJSON(t, resp, body, http.StatusOK, map[string]string{"status": "ok", "message": "Sandbox Runtime is active."})
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	s := newSandbox(t, Options{})
	for _, p := range []string{"/nope", "/execute/", "/upload/x", "/v1/files/a"} {
		resp, body := s.get(p)
		wantJSON(t, resp, body, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/execute", http.MethodPost},
		{http.MethodGet, "/upload", http.MethodPost},
		{http.MethodPost, "/", http.MethodGet},
		{http.MethodPost, "/download/a.txt", http.MethodGet},
		{http.MethodDelete, "/list/a", http.MethodGet},
		{http.MethodPut, "/exists/a", http.MethodGet},
	} {
		resp, body := s.do(tc.method, tc.path, "", nil)
		wantJSON(t, resp, body, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

func TestDefaults(t *testing.T) {
	got := Options{BaseDir: "rel"}.withDefaults()
	if !filepath.IsAbs(got.BaseDir) || got.ExecTimeout != 300*time.Second || got.MaxOutputBytes != 8<<20 ||
		got.MaxUploadBytes != 256<<20 || got.MaxRequestBytes != 1<<20 || got.Logger == nil {
		t.Errorf("defaults: %+v", got)
	}
	if got := (Options{}).withDefaults().BaseDir; got != "/app" {
		t.Errorf("default base directory %q, want /app", got)
	}
}

// jsonBody is v as a request body.
func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(data)
}

// Error bodies name what failed, not where the runtime keeps its files.
func TestErrTextHidesPaths(t *testing.T) {
	for _, err := range []error{
		&os.PathError{Op: "open", Path: "/srv/app/x", Err: os.ErrPermission},
		&os.LinkError{Op: "rename", Old: "/srv/app/.upload-1", New: "/srv/app/x", Err: os.ErrPermission},
	} {
		if got := errText(err); got != "permission denied" {
			t.Errorf("errText(%v) = %q", err, got)
		}
	}
}
