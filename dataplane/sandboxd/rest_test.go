package sandboxd

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newREST serves the REST API over a real listener on a fresh base
// directory.
func newREST(t *testing.T, opts Options) (*httptest.Server, string) {
	t.Helper()
	if opts.BaseDir == "" {
		opts.BaseDir = t.TempDir()
	}
	srv := httptest.NewServer(NewHandler(opts))
	t.Cleanup(srv.Close)
	return srv, opts.BaseDir
}

// call sends one request with a raw (already escaped) path and returns the
// status and body.
func call(t *testing.T, srv *httptest.Server, method, rawPath string, body io.Reader, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+rawPath, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, got, resp.Header
}

// wantError checks a JSON error body's status and code.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var e Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("status %d, body %q: not a JSON error: %v", status, body, err)
	}
	if status != wantStatus || e.Code != wantCode || e.Message == "" {
		t.Fatalf("got %d %+v, want %d with code %s and a message", status, e, wantStatus, wantCode)
	}
}

func TestPutGetRawFile(t *testing.T) {
	srv, base := newREST(t, Options{})
	status, body, _ := call(t, srv, http.MethodPut, "/v1/files/notes.txt", strings.NewReader("hello"), http.Header{"Content-Type": {"application/octet-stream"}})
	if status != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("PUT: %d %q, want 204 and no body", status, body)
	}
	st, err := os.Stat(filepath.Join(base, "notes.txt"))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("stored file: %v, mode %v; want mode 0644 by default", err, st.Mode())
	}
	status, body, hdr := call(t, srv, http.MethodGet, "/v1/files/notes.txt", nil, nil)
	if status != http.StatusOK || string(body) != "hello" || hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("GET: %d %q %q", status, body, hdr.Get("Content-Type"))
	}
}

func TestPutMode(t *testing.T) {
	srv, base := newREST(t, Options{})
	if status, body, _ := call(t, srv, http.MethodPut, "/v1/files/run.sh?mode=0750", strings.NewReader("#!/bin/sh\n"), nil); status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if st, _ := os.Stat(filepath.Join(base, "run.sh")); st.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v, want 0750", st.Mode().Perm())
	}
	for _, bad := range []string{"644", "0999", "07777", "0x1ff", "rwx", ""} {
		status, body, _ := call(t, srv, http.MethodPut, "/v1/files/bad.txt?mode="+bad, strings.NewReader("x"), nil)
		wantError(t, status, body, http.StatusBadRequest, CodeInvalidArgument)
	}
	if _, err := os.Stat(filepath.Join(base, "bad.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused PUT left a file: %v", err)
	}
}

func TestPutMultipart(t *testing.T) {
	srv, base := newREST(t, Options{})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("other", "ignored")
	fw, _ := mw.CreateFormFile("file", "whatever-name")
	_, _ = fw.Write([]byte("from multipart"))
	_ = mw.Close()
	status, body, _ := call(t, srv, http.MethodPut, "/v1/files/dir/up.txt", &buf, http.Header{"Content-Type": {mw.FormDataContentType()}})
	if status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if got, _ := os.ReadFile(filepath.Join(base, "dir", "up.txt")); string(got) != "from multipart" {
		t.Fatalf("stored %q", got)
	}
}

func TestEncodedSlashInSegment(t *testing.T) {
	srv, base := newREST(t, Options{})
	if status, body, _ := call(t, srv, http.MethodPut, "/v1/files/a%2Fb%2Fc.txt", strings.NewReader("deep"), nil); status != http.StatusNoContent {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if got, err := os.ReadFile(filepath.Join(base, "a", "b", "c.txt")); err != nil || string(got) != "deep" {
		t.Fatalf("a%%2Fb%%2Fc.txt stored as %q, %v; want a/b/c.txt", got, err)
	}
	for _, p := range []string{"/v1/files/a/b/c.txt", "/v1/files/a%2Fb/c.txt", "/v1/files/a/b%2Fc.txt"} {
		if status, body, _ := call(t, srv, http.MethodGet, p, nil, nil); status != http.StatusOK || string(body) != "deep" {
			t.Errorf("GET %s: %d %q", p, status, body)
		}
	}
}

func TestListDirectory(t *testing.T) {
	srv, base := newREST(t, Options{})
	mustWrite(t, filepath.Join(base, "sub", "b.txt"), "12345", 0o600)
	mustWrite(t, filepath.Join(base, "sub", "a.txt"), "1", 0o644)
	if err := os.Mkdir(filepath.Join(base, "sub", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	status, body, hdr := call(t, srv, http.MethodGet, "/v1/files/sub", nil, nil)
	if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET dir: %d %s", status, body)
	}
	var got DirListing
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for i, e := range got.Entries {
		if _, err := time.Parse(time.RFC3339, e.ModifiedAt); err != nil {
			t.Errorf("entry %s: modified_at %q is not RFC 3339: %v", e.Name, e.ModifiedAt, err)
		}
		got.Entries[i].ModifiedAt = ""
	}
	dirSize := got.Entries[2].Size
	want := DirListing{Path: "/sub", Entries: []DirEntry{
		{Name: "a.txt", Size: 1, Type: "file", Mode: "0644"},
		{Name: "b.txt", Size: 5, Type: "file", Mode: "0600"},
		{Name: "c", Size: dirSize, Type: "directory", Mode: "0755"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("listing (-want +got):\n%s", diff)
	}
	// The root, with and without a trailing slash.
	for _, p := range []string{"/v1/files", "/v1/files/"} {
		if status, body, _ := call(t, srv, http.MethodGet, p, nil, nil); status != http.StatusOK || !strings.Contains(string(body), `"name":"sub"`) {
			t.Errorf("GET %s: %d %s", p, status, body)
		}
	}
}

func TestHeadAndNotFound(t *testing.T) {
	srv, base := newREST(t, Options{})
	mustWrite(t, filepath.Join(base, "here.txt"), "x", 0o644)
	if status, _, _ := call(t, srv, http.MethodHead, "/v1/files/here.txt", nil, nil); status != http.StatusOK {
		t.Errorf("HEAD existing file: %d", status)
	}
	if status, _, _ := call(t, srv, http.MethodHead, "/v1/files/", nil, nil); status != http.StatusOK {
		t.Errorf("HEAD root: %d", status)
	}
	if status, _, _ := call(t, srv, http.MethodHead, "/v1/files/missing.txt", nil, nil); status != http.StatusNotFound {
		t.Errorf("HEAD missing: %d", status)
	}
	status, body, _ := call(t, srv, http.MethodGet, "/v1/files/missing.txt", nil, nil)
	wantError(t, status, body, http.StatusNotFound, CodeNotFound)
	status, body, _ = call(t, srv, http.MethodGet, "/v1/nothing", nil, nil)
	wantError(t, status, body, http.StatusNotFound, CodeNotFound)
	status, body, _ = call(t, srv, http.MethodPost, "/v1/files/here.txt", nil, nil)
	wantError(t, status, body, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
}

func TestConfinement(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret"), "s3cret", 0o644)
	srv, base := newREST(t, Options{})
	if err := os.Symlink(outside, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(base, filepath.Join(outside, "secret"))
	escaped := strings.ReplaceAll(rel, "/", "%2F")
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/files/" + escaped},
		{http.MethodGet, "/v1/files/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd"},
		{http.MethodGet, "/v1/files/link/secret"},
		{http.MethodGet, "/v1/files/link"},
		{http.MethodHead, "/v1/files/link/secret"},
		{http.MethodPut, "/v1/files/link/new.txt"},
		{http.MethodPut, "/v1/files/" + escaped},
		{http.MethodDelete, "/v1/files/link/secret"},
		{http.MethodDelete, "/v1/files/" + escaped},
	} {
		status, body, _ := call(t, srv, tc.method, tc.path, strings.NewReader("x"), nil)
		if tc.method == http.MethodHead {
			if status != http.StatusForbidden {
				t.Errorf("HEAD %s: %d, want 403", tc.path, status)
			}
			continue
		}
		if status != http.StatusForbidden || !strings.Contains(string(body), CodePermissionDenied) {
			t.Errorf("%s %s: %d %s, want 403 PERMISSION_DENIED", tc.method, tc.path, status, body)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "s3cret" {
		t.Fatalf("the file outside was changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("a PUT through a symlink wrote outside the root")
	}
}

func TestDelete(t *testing.T) {
	srv, base := newREST(t, Options{})
	mustWrite(t, filepath.Join(base, "f.txt"), "x", 0o644)
	mustWrite(t, filepath.Join(base, "full", "inner", "g.txt"), "x", 0o644)
	if err := os.Mkdir(filepath.Join(base, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(base, "target.txt"), "kept", 0o644)
	if err := os.Symlink("target.txt", filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	del := func(p string) (int, []byte) {
		status, body, _ := call(t, srv, http.MethodDelete, p, nil, nil)
		return status, body
	}
	if status, body := del("/v1/files/f.txt"); status != http.StatusNoContent {
		t.Fatalf("DELETE file: %d %s", status, body)
	}
	status, body := del("/v1/files/f.txt")
	wantError(t, status, body, http.StatusNotFound, CodeNotFound)
	for _, p := range []string{"/v1/files/full", "/v1/files/full?recursive=false"} {
		status, body = del(p)
		wantError(t, status, body, http.StatusConflict, CodeConflict)
	}
	if _, err := os.Stat(filepath.Join(base, "full", "inner", "g.txt")); err != nil {
		t.Fatalf("a refused DELETE removed something: %v", err)
	}
	status, body = del("/v1/files/full?recursive=maybe")
	wantError(t, status, body, http.StatusBadRequest, CodeInvalidArgument)
	if status, body := del("/v1/files/full?recursive=true"); status != http.StatusNoContent {
		t.Fatalf("DELETE recursive: %d %s", status, body)
	}
	if status, body := del("/v1/files/empty"); status != http.StatusNoContent {
		t.Fatalf("DELETE empty directory: %d %s", status, body)
	}
	if status, body := del("/v1/files/alias"); status != http.StatusNoContent {
		t.Fatalf("DELETE symlink: %d %s", status, body)
	}
	if got, err := os.ReadFile(filepath.Join(base, "target.txt")); err != nil || string(got) != "kept" {
		t.Fatalf("deleting a symlink touched its target: %q %v", got, err)
	}
	for _, p := range []string{"/v1/files/", "/v1/files/.", "/v1/files/%2E%2E"} {
		status, body = del(p)
		if status != http.StatusBadRequest && status != http.StatusForbidden {
			t.Errorf("DELETE %s: %d %s, want 400 or 403", p, status, body)
		}
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("the root is gone: %v", err)
	}
}

func TestPutConflictsAndLimits(t *testing.T) {
	srv, base := newREST(t, Options{MaxUploadBytes: 8})
	if err := os.Mkdir(filepath.Join(base, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(base, "file"), "x", 0o644)
	status, body, _ := call(t, srv, http.MethodPut, "/v1/files/d", strings.NewReader("x"), nil)
	wantError(t, status, body, http.StatusBadRequest, CodeInvalidArgument)
	status, body, _ = call(t, srv, http.MethodPut, "/v1/files/file/under", strings.NewReader("x"), nil)
	wantError(t, status, body, http.StatusConflict, CodeFailedPrecondition)
	status, body, _ = call(t, srv, http.MethodPut, "/v1/files/", strings.NewReader("x"), nil)
	wantError(t, status, body, http.StatusBadRequest, CodeInvalidArgument)
	status, body, _ = call(t, srv, http.MethodPut, "/v1/files/big", strings.NewReader("123456789"), nil)
	wantError(t, status, body, http.StatusRequestEntityTooLarge, CodeResourceExhausted)
	if _, err := os.Stat(filepath.Join(base, "big")); err == nil {
		t.Fatal("an oversized upload left a file")
	}
}

func TestHealthMetadataMiddleware(t *testing.T) {
	ready := errors.New("warming up")
	var seen []string
	srv, _ := newREST(t, Options{
		Metadata: map[string]string{"SANDBOX_BASE_DIR": "/app"},
		Ready:    func() error { return ready },
		Middleware: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = append(seen, r.URL.Path)
				next.ServeHTTP(w, r)
			})
		},
	})
	status, body, _ := call(t, srv, http.MethodGet, "/v1/health", nil, nil)
	wantError(t, status, body, http.StatusServiceUnavailable, CodeUnavailable)
	ready = nil
	status, body, _ = call(t, srv, http.MethodGet, "/v1/health", nil, nil)
	var h struct {
		Status string `json:"status"`
		Uptime *int64 `json:"uptime_seconds"`
	}
	if err := json.Unmarshal(body, &h); err != nil || status != http.StatusOK || h.Status != "ok" || h.Uptime == nil ||
		!regexp.MustCompile(`^\{"status":"ok","uptime_seconds":\d+\}\n$`).Match(body) {
		t.Fatalf("health: %d %s", status, body)
	}
	status, body, _ = call(t, srv, http.MethodGet, "/v1/metadata", nil, nil)
	if status != http.StatusOK || string(body) != `{"env":{"SANDBOX_BASE_DIR":"/app"}}`+"\n" {
		t.Fatalf("metadata: %d %s", status, body)
	}
	if diff := cmp.Diff([]string{"/v1/health", "/v1/health", "/v1/metadata"}, seen); diff != "" {
		t.Fatalf("middleware saw (-want +got):\n%s", diff)
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
