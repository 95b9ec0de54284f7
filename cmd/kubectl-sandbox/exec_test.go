package main

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentsandbox/reconciler/dataplane/client"
)

// fakeSandbox stands in for a sandbox's runtime (upstream's legacy
// protocol) and records what exec and cp asked of it.
type fakeSandbox struct {
	mu       sync.Mutex
	opened   []string // namespace/name
	commands []string
	files    map[string]string
}

func withFakeSandbox(t *testing.T) *fakeSandbox {
	f := &fakeSandbox{files: map[string]string{"notes.txt": "from the sandbox"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.URL.Path == "/execute":
			var in struct{ Command string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			f.commands = append(f.commands, in.Command)
			_ = json.NewEncoder(w).Encode(client.Result{Stdout: "out:" + in.Command, Stderr: "err", ExitCode: 3})
		case r.URL.Path == "/upload":
			file, hdr, err := r.FormFile("file")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			b, _ := io.ReadAll(file)
			// The name as sent (FileHeader.Filename keeps only its base).
			_, params, _ := mime.ParseMediaType(hdr.Header.Get("Content-Disposition"))
			f.files[params["filename"]] = string(b)
		case strings.HasPrefix(r.URL.Path, "/download/"):
			content, ok := f.files[strings.TrimPrefix(r.URL.Path, "/download/")]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"detail": "File not found"}`)
				return
			}
			_, _ = io.WriteString(w, content)
		}
	}))
	t.Cleanup(srv.Close)
	saved := openSandbox
	openSandbox = func(ctx context.Context, fl *sandboxFlags, name string) (*client.Sandbox, error) {
		f.mu.Lock()
		f.opened = append(f.opened, fl.namespace+"/"+name)
		f.mu.Unlock()
		return client.Dial(ctx, fl.namespace, name, client.WithBaseURL(srv.URL))
	}
	t.Cleanup(func() { openSandbox = saved })
	return f
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"echo", "hello world", "it's", "", "$HOME", `a"b`, "plain-1.0/x=y:z,@%+"})
	want := `echo 'hello world' 'it'"'"'s' '' '$HOME' 'a"b' plain-1.0/x=y:z,@%+`
	if got != want {
		t.Errorf("shellJoin = %s\nwant        %s", got, want)
	}
}

func TestExec(t *testing.T) {
	f := withFakeSandbox(t)
	stdout, stderr, code := runCLI(t, "", "exec", "my-claim", "-n", "team", "--", "sh", "-c", "exit 3")
	if code != 3 || stdout != "out:sh -c 'exit 3'" || stderr != "err" {
		t.Errorf("exec = %d, stdout %q, stderr %q; want the command's exit code and output", code, stdout, stderr)
	}
	// Without --, the command follows the name.
	if _, _, code := runCLI(t, "", "exec", "-n", "team", "sb-1", "ls", "-la"); code != 3 {
		t.Errorf("exec without -- = %d", code)
	}
	if want := []string{"team/my-claim", "team/sb-1"}; strings.Join(f.opened, " ") != strings.Join(want, " ") {
		t.Errorf("opened %v, want %v", f.opened, want)
	}
	if len(f.commands) != 2 || f.commands[1] != "ls -la" {
		t.Errorf("commands %q", f.commands)
	}
	for _, args := range [][]string{{"exec"}, {"exec", "sb"}, {"exec", "sb", "--"}, {"exec", "a", "b", "--", "ls"}, {"exec", "--bogus", "sb", "--", "ls"}} {
		if _, _, code := runCLI(t, "", args...); code != exitUsage {
			t.Errorf("%q = %d, want %d", args, code, exitUsage)
		}
	}
}

func TestCp(t *testing.T) {
	f := withFakeSandbox(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "data.csv")
	if err := os.WriteFile(local, []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "", "cp", local, "sb:"); code != exitOK || f.files["data.csv"] != "a,b\n" {
		t.Fatalf("cp LOCAL sb: = %d (%s), files %v", code, stderr, f.files)
	}
	if _, stderr, code := runCLI(t, "piped", "cp", "-", "sb:in.txt", "-n", "team"); code != exitOK || f.files["in.txt"] != "piped" {
		t.Fatalf("cp - sb:in.txt = %d (%s), files %v", code, stderr, f.files)
	}
	if _, stderr, code := runCLI(t, "", "cp", local, "sb:sub/dir.csv"); code != exitOK || f.files["sub/dir.csv"] != "a,b\n" {
		t.Errorf("cp to a path with directories = %d (%s), files %v", code, stderr, f.files)
	}
	if _, stderr, code := runCLI(t, "", "cp", local, "sb:sub/"); code != exitOK || f.files["sub/data.csv"] != "a,b\n" {
		t.Errorf("cp into a directory = %d (%s), files %v", code, stderr, f.files)
	}

	if _, stderr, code := runCLI(t, "", "cp", "sb:notes.txt", dir); code != exitOK {
		t.Fatalf("cp sb:notes.txt DIR = %d (%s)", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "from the sandbox" {
		t.Errorf("downloaded %q, %v", b, err)
	}
	if stdout, _, code := runCLI(t, "", "cp", "sb:notes.txt", "-"); code != exitOK || stdout != "from the sandbox" {
		t.Errorf("cp sb:notes.txt - = %d, %q", code, stdout)
	}
	missing := filepath.Join(dir, "missing.txt")
	if _, stderr, code := runCLI(t, "", "cp", "sb:missing.txt", missing); code != exitFindings || !strings.Contains(stderr, "File not found") {
		t.Errorf("cp of a missing file = %d, %s", code, stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed download left %s behind", missing)
	}

	for _, args := range [][]string{{"cp", "a", "b"}, {"cp", "x:a", "y:b"}, {"cp", "a"}, {"cp", "./a:b", "c"}} {
		if _, _, code := runCLI(t, "", args...); code != exitUsage {
			t.Errorf("%q = %d, want %d", args, code, exitUsage)
		}
	}
}
