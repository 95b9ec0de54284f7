package sandboxd

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUpstreamBodies: the REST API answers with upstream sandboxd's exact
// bytes (encoding/json with its trailing newline; its codes and messages,
// which upstream's SDKs surface as "CODE: message"), and a listing's path
// and modified_at are spelled as upstream spells them ("/" + the path;
// RFC 3339 to the second).
func TestUpstreamBodies(t *testing.T) {
	srv, base := newREST(t, Options{})
	mustWrite(t, filepath.Join(base, "dir", "a.txt"), "abc", 0o600)
	if err := os.Mkdir(filepath.Join(base, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/v1/files/..%2F..%2Fetc%2Fpasswd", http.StatusForbidden,
			`{"code":"PERMISSION_DENIED","message":"path traversal outside sandbox root is forbidden"}`},
		{http.MethodDelete, "/v1/files/..%2Fx", http.StatusForbidden,
			`{"code":"PERMISSION_DENIED","message":"path traversal outside sandbox root is forbidden"}`},
		{http.MethodGet, "/v1/files/missing", http.StatusNotFound,
			`{"code":"NOT_FOUND","message":"path does not exist within the sandbox"}`},
		{http.MethodDelete, "/v1/files/missing", http.StatusNotFound,
			`{"code":"NOT_FOUND","message":"path does not exist within the sandbox"}`},
		{http.MethodDelete, "/v1/files/dir", http.StatusConflict,
			`{"code":"CONFLICT","message":"directory is not empty; pass recursive=true to remove it"}`},
		{http.MethodPut, "/v1/files/x?mode=0999", http.StatusBadRequest,
			`{"code":"INVALID_ARGUMENT","message":"mode \"0999\" must match ^0[0-7]{3}$"}`},
		{http.MethodPut, "/v1/files/empty", http.StatusBadRequest,
			`{"code":"INVALID_ARGUMENT","message":"target path is a directory"}`},
	} {
		status, body, hdr := call(t, srv, tc.method, tc.path, strings.NewReader("x"), nil)
		if status != tc.status || string(body) != tc.body+"\n" || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q (%s); want %d %q", tc.method, tc.path, status, body, hdr.Get("Content-Type"), tc.status, tc.body+"\n")
		}
	}
	status, body, _ := call(t, srv, http.MethodGet, "/v1/files/dir", nil, nil)
	want := regexp.MustCompile(`^\{"path":"/dir","entries":\[\{"name":"a\.txt","size":3,"type":"file",` +
		`"modified_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","mode":"0600"\}\]\}` + "\n$")
	if status != http.StatusOK || !want.Match(body) {
		t.Errorf("GET /v1/files/dir: %d %q; want %s", status, body, want)
	}
	status, body, _ = call(t, srv, http.MethodGet, "/v1/files/", nil, nil)
	if status != http.StatusOK || !strings.HasPrefix(string(body), `{"path":"/","entries":[`) {
		t.Errorf("GET /v1/files/: %d %q; want the root's listing with path \"/\"", status, body)
	}
}
