package runtime

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestResolve(t *testing.T) {
	s := newSandbox(t, Options{})
	h := New(Options{BaseDir: s.base}).(*handler)
	out := s.outside()
	base, err := filepath.EvalSymlinks(s.base)
	if err != nil {
		t.Fatal(err)
	}
	s.write("a/b/file.txt", "x")
	s.symlink("a/b", "to-b")                           // relative, inside
	s.symlink("to-b/../b/file.txt", "chain")           // through another link, ".." inside
	s.symlink(filepath.Join(base, "a"), "abs-in")      // absolute, inside
	s.symlink("missing/../../outside/x", "sneaky")     // dangling, climbs out
	s.symlink("missing/../a", "dangling-but-inside")   // resolves to a/ once followed
	s.symlink("loop2", "loop1")                        // a loop
	s.symlink("loop1", "loop2")                        //
	s.symlink(filepath.Join(out, "new.txt"), "to-new") // dangling, outside
	for _, tc := range []struct {
		raw, want string
		err       error
	}{
		{raw: "", want: base},
		{raw: ".", want: base},
		{raw: "///", want: base},
		{raw: "a/b/file.txt", want: filepath.Join(base, "a/b/file.txt")},
		{raw: "/a/b/file.txt", want: filepath.Join(base, "a/b/file.txt")},
		{raw: "a/./b/../b/file.txt", want: filepath.Join(base, "a/b/file.txt")},
		{raw: "to-b/file.txt", want: filepath.Join(base, "a/b/file.txt")},
		{raw: "chain", want: filepath.Join(base, "a/b/file.txt")},
		{raw: "abs-in/b", want: filepath.Join(base, "a/b")},
		{raw: "not/there/yet.txt", want: filepath.Join(base, "not/there/yet.txt")},
		{raw: "a/b/file.txt/below", want: filepath.Join(base, "a/b/file.txt/below")},
		{raw: "dangling-but-inside", want: filepath.Join(base, "a")},
		{raw: "..", err: errAccessDenied},
		{raw: "a/../../outside", err: errAccessDenied},
		{raw: "sneaky", err: errAccessDenied},
		{raw: "to-new", err: errAccessDenied},
		{raw: "x\x00y", err: errAccessDenied},
		{raw: "loop1", err: syscall.ELOOP},
		{raw: "loop1/x", err: syscall.ELOOP},
	} {
		got, err := h.resolve(tc.raw)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("resolve(%q) = %q, %v; want %v", tc.raw, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
	// A loop is not there, as far as clients are concerned.
	resp, body := s.get("/exists/loop1")
	wantJSON(t, resp, body, http.StatusOK, ExistsResponse{Path: "loop1", Exists: false})
	resp, body = s.get("/download/loop1")
	wantJSON(t, resp, body, http.StatusNotFound, message("File not found: too many levels of symbolic links"))
}

// A base directory reached through a symlink works as itself.
func TestResolveBaseThroughSymlink(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "base")); err != nil {
		t.Fatal(err)
	}
	h := New(Options{BaseDir: filepath.Join(root, "base")}).(*handler)
	real, _ := filepath.EvalSymlinks(filepath.Join(root, "real"))
	if got, err := h.resolve("f.txt"); err != nil || got != filepath.Join(real, "f.txt") {
		t.Errorf("resolve = %q, %v", got, err)
	}
	if _, err := h.resolve("../real/f.txt"); !errors.Is(err, errAccessDenied) {
		t.Errorf("resolve(../real/f.txt): %v, want access denied", err)
	}
}
