package envd

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
)

// The attacker: a client that tries to reach outside the sandbox's root
// with "..", absolute paths, NUL bytes and symlinks planted inside the
// root, through every filesystem call, /files and a watch. Nothing outside
// is read, listed, watched, created, moved or deleted; ".." and absolute
// paths land inside the root, escaping symlinks are permission_denied
// (403 on /files).
func TestPathEscapes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.base, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(e.base, "secret-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../"+outside, filepath.Join(e.base, "relative-escape")); err != nil {
		t.Fatal(err)
	}
	e.write(t, "mine.txt", "mine")
	rel, err := filepath.Rel(e.base, secret)
	if err != nil {
		t.Fatal(err)
	}

	// Relative paths are under /home/user: "../../escape" is /escape.
	denied := []string{"/escape", "/escape/secret.txt", "../../escape/secret.txt", "/escape/../escape/secret.txt", "/relative-escape/secret.txt", "/secret-link", "a\x00b"}
	for _, p := range denied {
		if _, err := e.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: p})); code(err) != connect.CodePermissionDenied && p != "/secret-link" {
			t.Errorf("ListDir %q: %v, want permission_denied", p, err)
		}
		if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: p + "/newdir"})); code(err) != connect.CodePermissionDenied {
			t.Errorf("MakeDir %q: %v, want permission_denied", p+"/newdir", err)
		}
		if _, err := e.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "/mine.txt", Destination: p + "/stolen"})); code(err) != connect.CodePermissionDenied {
			t.Errorf("Move to %q: %v, want permission_denied", p+"/stolen", err)
		}
		if _, err := e.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: p + "/secret.txt", Destination: "/taken"})); code(err) != connect.CodePermissionDenied {
			t.Errorf("Move from %q: %v, want permission_denied", p+"/secret.txt", err)
		}
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: p + "/secret.txt"})); code(err) != connect.CodePermissionDenied {
			t.Errorf("Remove %q: %v, want permission_denied", p+"/secret.txt", err)
		}
		if _, err := e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: p + "/secret.txt"})); code(err) != connect.CodePermissionDenied {
			t.Errorf("Stat %q: %v, want permission_denied", p+"/secret.txt", err)
		}
		st, err := e.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: p}))
		if err == nil {
			for st.Receive() {
				t.Errorf("WatchDir %q: got %v", p, st.Msg())
				break
			}
			err = st.Err()
			_ = st.Close()
		}
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("WatchDir %q: %v, want permission_denied", p, err)
		}
		if status, body := e.get(t, p); status != http.StatusForbidden || strings.Contains(body, "top secret") {
			t.Errorf("GET /files %q: %d %q, want 403", p, status, body)
		}
		if status := e.postRaw(t, p+"/planted", "x"); status != http.StatusForbidden {
			t.Errorf("POST /files %q: %d, want 403", p+"/planted", status)
		}
	}
	// ".." and absolute paths are read inside the root: the secret's real
	// path, and climbing up to it, find nothing there.
	for _, p := range []string{secret, "../../../../../../../../" + secret, "/" + rel, "/../" + rel, "../../" + rel} {
		if status, body := e.get(t, p); status != http.StatusNotFound || strings.Contains(body, "top secret") {
			t.Errorf("GET /files %q: %d %q, want 404", p, status, body)
		}
		if _, err := e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: p})); code(err) != connect.CodeNotFound {
			t.Errorf("Stat %q: %v, want not_found", p, err)
		}
	}
	// A multipart filename that climbs lands inside the root.
	status := e.postMultipart(t, "", map[string]string{"../../../../../../" + outside + "/planted.txt": "x"})
	if status != http.StatusOK {
		t.Errorf("multipart climb: %d", status)
	}
	if _, err := os.Stat(filepath.Join(e.base, outside, "planted.txt")); err != nil {
		t.Errorf("the climbing upload is not inside the root: %v", err)
	}
	// The working directory of a program likewise.
	for _, cwd := range []string{"/escape", "/relative-escape"} {
		req := bash("touch planted")
		req.Process.Cwd = &cwd
		st, err := e.proc.Start(ctx, connect.NewRequest(req))
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
		}
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("Start with cwd %q: %v, want permission_denied", cwd, err)
		}
	}
	// Removing the escaping symlink removes the link, not the directory.
	if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "/escape"})); err != nil {
		t.Errorf("remove the link itself: %v", err)
	}
	entries, _ := os.ReadDir(outside)
	if data, err := os.ReadFile(secret); err != nil || string(data) != "top secret" || len(entries) != 1 {
		t.Fatalf("outside the root changed: %q %v, %d entries", data, err, len(entries))
	}
}

// get is GET /files?path=p: status and body.
func (e *env) get(t *testing.T, p string) (int, string) {
	t.Helper()
	resp, err := http.Get(e.url + "/files?path=" + url.QueryEscape(p) + "&username=user")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// postRaw is POST /files?path=p with a raw octet-stream body.
func (e *env) postRaw(t *testing.T, p, content string) int {
	t.Helper()
	resp, err := http.Post(e.url+"/files?path="+url.QueryEscape(p), "application/octet-stream", strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// postMultipart is POST /files (with ?path=p when set) with one part
// "file" per entry, its filename the entry's key.
func (e *env) postMultipart(t *testing.T, p string, files map[string]string) int {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range files {
		w, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, content)
	}
	_ = mw.Close()
	u := e.url + "/files"
	if p != "" {
		u += "?path=" + url.QueryEscape(p)
	}
	resp, err := http.Post(u, mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
