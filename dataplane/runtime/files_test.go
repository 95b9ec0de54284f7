package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// multipartBody is a multipart/form-data body with a field "file" whose
// Content-Disposition carries filename exactly as given, after other fields.
func multipartBody(t *testing.T, filename string, content []byte, before ...string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range before {
		if err := mw.WriteField(f, "value of "+f); err != nil {
			t.Fatal(err)
		}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filename))
	h.Set("Content-Type", "application/octet-stream")
	part, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}

func (s *sandbox) upload(filename string, content []byte, before ...string) (*http.Response, []byte) {
	s.t.Helper()
	ct, body := multipartBody(s.t, filename, content, before...)
	return s.do(http.MethodPost, "/upload", ct, body)
}

// leftovers are the base directory's entries other than the ones named.
func (s *sandbox) leftovers(names ...string) []string {
	s.t.Helper()
	var out []string
	err := filepath.WalkDir(s.base, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == s.base {
			return err
		}
		rel, _ := filepath.Rel(s.base, p)
		for _, n := range names {
			if rel == n {
				return nil
			}
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func TestUpload(t *testing.T) {
	s := newSandbox(t, Options{MaxUploadBytes: 1000})
	resp, body := s.upload("hello.txt", []byte("hello world"), "extra")
	wantJSON(t, resp, body, http.StatusOK, message("File 'hello.txt' uploaded successfully."))
	if data, err := os.ReadFile(filepath.Join(s.base, "hello.txt")); err != nil || string(data) != "hello world" {
		t.Errorf("the file holds %q, %v", data, err)
	}
	// Again, bigger, at the limit: replaced whole.
	resp, body = s.upload("hello.txt", bytes.Repeat([]byte("x"), 1000))
	wantJSON(t, resp, body, http.StatusOK, message("File 'hello.txt' uploaded successfully."))
	if st, err := os.Stat(filepath.Join(s.base, "hello.txt")); err != nil || st.Size() != 1000 || st.Mode().Perm() != 0o644 {
		t.Errorf("after the second upload: %v, %v", st, err)
	}
	// Over the limit: 413, the old content stays, no temporary file remains.
	resp, body = s.upload("hello.txt", bytes.Repeat([]byte("y"), 1001))
	wantJSON(t, resp, body, http.StatusRequestEntityTooLarge, message("File too large: the limit is 1000 bytes"))
	resp, body = s.upload("other.txt", bytes.Repeat([]byte("y"), 100_000))
	wantJSON(t, resp, body, http.StatusRequestEntityTooLarge, message("File too large: the limit is 1000 bytes"))
	if st, err := os.Stat(filepath.Join(s.base, "hello.txt")); err != nil || st.Size() != 1000 {
		t.Errorf("an oversized upload changed the file: %v, %v", st, err)
	}
	if got := s.leftovers("hello.txt"); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

func TestUploadRefusesBadNames(t *testing.T) {
	s := newSandbox(t, Options{})
	out := s.outside()
	s.symlink(filepath.Join(out, "victim.txt"), "dangling-out")
	s.symlink(out, "dir-out")
	if err := os.Mkdir(filepath.Join(s.base, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filename string
		status   int
		want     any
	}{
		{"../evil.txt", http.StatusForbidden, accessDenied},
		{"..", http.StatusForbidden, accessDenied},
		{"/../../evil.txt", http.StatusForbidden, accessDenied},
		{"sub/../../evil.txt", http.StatusForbidden, accessDenied},
		{"dangling-out", http.StatusForbidden, accessDenied}, // a symlink to a missing file outside
		{"/etc/passwd", http.StatusForbidden, accessDenied},
		{"dir-out/x", http.StatusForbidden, accessDenied},     // through a symlink to outside
		{"dir-out/new/x", http.StatusForbidden, accessDenied}, // and no directory made out there
		{"sub/", http.StatusBadRequest, message("Invalid filename %q: the multipart filename must name a file under the base directory", "sub/")},
		{"", http.StatusBadRequest, message("Invalid filename %q: the multipart filename must name a file", "")},
		{".", http.StatusBadRequest, message("Invalid filename %q: the multipart filename must name a file", ".")},
		{"sub", http.StatusConflict, message("File upload failed: %q is a directory", "sub")},
	} {
		resp, body := s.upload(tc.filename, []byte("pwned"))
		wantJSON(t, resp, body, tc.status, tc.want)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("an upload landed outside the base directory: %v", entries)
	}
	if got := s.leftovers("dangling-out", "dir-out", "sub"); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

func TestUploadMalformed(t *testing.T) {
	s := newSandbox(t, Options{})
	missing := fieldError([]string{"body", "file"}, "missing", "Field required")
	resp, body := s.do(http.MethodPost, "/upload", "application/json", strings.NewReader(`{"file": "x"}`))
	wantJSON(t, resp, body, http.StatusUnprocessableEntity, missing)

	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("other", "x")
	_ = mw.Close()
	resp, body = s.do(http.MethodPost, "/upload", mw.FormDataContentType(), &buf)
	wantJSON(t, resp, body, http.StatusUnprocessableEntity, missing)

	buf.Reset()
	mw = multipart.NewWriter(&buf)
	_ = mw.WriteField("file", "not a file")
	_ = mw.Close()
	resp, body = s.do(http.MethodPost, "/upload", mw.FormDataContentType(), &buf)
	wantJSON(t, resp, body, http.StatusUnprocessableEntity,
		fieldError([]string{"body", "file"}, "value_error", "Expected UploadFile, received: str"))

	resp, body = s.do(http.MethodPost, "/upload", "multipart/form-data; boundary=xyz", strings.NewReader("--xyz\r\nbroken"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Invalid multipart body") {
		t.Errorf("a broken body: %d %s", resp.StatusCode, body)
	}
}

func TestDownload(t *testing.T) {
	s := newSandbox(t, Options{})
	s.write("report.txt", "contents")
	s.write("dir/sub/nested name.bin", "\x00\x01binary")
	s.write("etc/passwd", "the sandbox's own etc/passwd")
	s.symlink("dir/sub/nested name.bin", "link-in")
	for _, tc := range []struct{ path, want string }{
		{"/download/report.txt", "contents"},
		{"/download/dir%2Fsub%2Fnested%20name.bin", "\x00\x01binary"},
		{"/download/dir/sub/nested%20name.bin", "\x00\x01binary"},
		{"/download/link-in", "\x00\x01binary"},
		// Absolute paths are taken relative to the base directory, as upstream does.
		{"/download/%2Fetc%2Fpasswd", "the sandbox's own etc/passwd"},
		{"/download//etc/passwd", "the sandbox's own etc/passwd"},
	} {
		resp, body := s.get(tc.path)
		if resp.StatusCode != http.StatusOK || string(body) != tc.want {
			t.Errorf("GET %s: %d %q, want 200 %q", tc.path, resp.StatusCode, body, tc.want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("GET %s: Content-Type %q", tc.path, ct)
		}
	}
	resp, _ := s.get("/download/dir%2Fsub%2Fnested%20name.bin")
	if got, want := resp.Header.Get("Content-Disposition"), `attachment; filename="nested name.bin"`; got != want {
		t.Errorf("Content-Disposition %q, want %q", got, want)
	}
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/download/report.txt", nil)
	req.Header.Set("Range", "bytes=3-5")
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(body) != "ten" {
		t.Errorf("a range: %d %q", resp.StatusCode, body)
	}
}

func TestDownloadNotFound(t *testing.T) {
	s := newSandbox(t, Options{})
	s.write("dir/a.txt", "a")
	s.write("file.txt", "x")
	s.symlink("missing-target", "dangling-in")
	for _, p := range []string{"/download/missing.txt", "/download/dir", "/download/", "/download/dangling-in", "/download/file.txt%2Fx"} {
		resp, body := s.get(p)
		wantJSON(t, resp, body, http.StatusNotFound, message("File not found"))
	}
}

// Every way out of the base directory is refused with upstream's 403.
func TestPathEscapes(t *testing.T) {
	s := newSandbox(t, Options{})
	out := s.outside()
	if err := os.WriteFile(filepath.Join(out, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.symlink(filepath.Join(out, "secret.txt"), "link-out")
	s.symlink(out, "dir-out")
	s.symlink("../outside", "relative-out")
	s.symlink(filepath.Join(out, "missing"), "dangling-out")
	s.write("sub/a.txt", "a")
	for _, route := range []string{"download", "list", "exists"} {
		for _, p := range []string{
			"..", "%2E%2E", "..%2Foutside%2Fsecret.txt", "../outside/secret.txt", "%2E%2E%2Foutside",
			"sub%2F..%2F..%2Foutside", "%2F..%2Foutside%2Fsecret.txt", "link-out", "dir-out",
			"dir-out%2Fsecret.txt", "relative-out%2Fsecret.txt", "dangling-out", "a%00b",
		} {
			u := "/" + route + "/" + p
			if strings.Contains(p, "../") || p == ".." {
				// A client would clean these; send them raw.
				resp, body := s.rawGet(u)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Access denied") {
					t.Errorf("GET %s: %d %s, want 403", u, resp.StatusCode, body)
				}
				continue
			}
			resp, body := s.get(u)
			wantJSON(t, resp, body, http.StatusForbidden, accessDenied)
		}
	}
}

func TestList(t *testing.T) {
	s := newSandbox(t, Options{})
	s.write("b.txt", "hello")
	s.write("a/inner.txt", "x")
	s.symlink("b.txt", "c-link")
	old := time.Date(2024, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	if err := os.Chtimes(filepath.Join(s.base, "b.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/list/", "/list/%2E", "/list/.%2F", "/list"} {
		resp, body := s.get(p)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		var got []FileEntry
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Name != "a" || got[0].Type != "directory" ||
			got[1].Name != "b.txt" || got[1].Type != "file" || got[1].Size != 5 ||
			got[2].Name != "c-link" || got[2].Type != "file" || got[2].Size != 5 {
			t.Errorf("GET %s: %+v", p, got)
		}
		if len(got) > 1 && math.Abs(got[1].ModTime-float64(old.UnixNano())/1e9) > 1e-6 {
			t.Errorf("mod_time %f, want %f", got[1].ModTime, float64(old.UnixNano())/1e9)
		}
	}
	resp, body := s.get("/list/a")
	if !strings.Contains(string(body), `"name":"inner.txt","size":1,"type":"file","mod_time":`) {
		t.Errorf("GET /list/a: %d %s", resp.StatusCode, body)
	}
	if err := os.Mkdir(filepath.Join(s.base, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, body = s.get("/list/empty")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("an empty directory: %d %s, want []", resp.StatusCode, body)
	}
	resp, body = s.get("/list/missing")
	wantJSON(t, resp, body, http.StatusNotFound, message("Directory not found"))
	resp, body = s.get("/list/b.txt")
	wantJSON(t, resp, body, http.StatusNotFound, message("Not a directory"))
}

func TestExists(t *testing.T) {
	s := newSandbox(t, Options{})
	s.write("dir/present.txt", "x")
	s.symlink("nowhere", "dangling-in")
	for _, tc := range []struct {
		escaped, path string
		exists        bool
	}{
		{"present.txt", "present.txt", false},
		{"dir%2Fpresent.txt", "dir/present.txt", true},
		{"dir", "dir", true},
		{"%2E", ".", true},
		{"dangling-in", "dangling-in", false},
		{"dir%2Fpresent.txt%2Fx", "dir/present.txt/x", false},
	} {
		resp, body := s.get("/exists/" + tc.escaped)
		wantJSON(t, resp, body, http.StatusOK, ExistsResponse{Path: tc.path, Exists: tc.exists})
	}
}

// TestUploadIntoDirectories: upstream's Python SDK sends a relative path
// with directories as the filename; it lands there, directories made.
func TestUploadIntoDirectories(t *testing.T) {
	s := newSandbox(t, Options{})
	for _, name := range []string{"sub/a.txt", "data/2026/in.csv"} {
		resp, body := s.upload(name, []byte("x"))
		wantJSON(t, resp, body, http.StatusOK, message("File '%s' uploaded successfully.", name))
		if got, err := os.ReadFile(filepath.Join(s.base, filepath.FromSlash(name))); err != nil || string(got) != "x" {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
}
