package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartCreatesAgainOnce: when kwokctl fails to create the cluster (it
// gives up on its CRDs when the API server it started serves late), Start
// deletes what it made and creates it once more, then reports the error.
// A stand-in kwokctl records its calls and fails every create.
func TestStartCreatesAgainOnce(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\nfor a in \"$@\"; do case $a in create|delete|get) echo $a >> " + calls + "; esac; done\n" +
		"case \" $* \" in *\" create \"*) echo 'failed to init crds: resource not handled' >&2; exit 1;; esac\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "kwokctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range binaryFlags {
		if err := os.WriteFile(filepath.Join(bin, b.name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Start(context.Background(), Options{Name: "flaky", Workdir: t.TempDir(), BinDir: bin})
	if err == nil || !strings.Contains(err.Error(), "resource not handled") {
		t.Fatalf("Start: %v, want kwokctl's error", err)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "create"); n != createAttempts {
		t.Errorf("kwokctl create ran %d times, want %d (calls: %q)", n, createAttempts, got)
	}
	if !strings.Contains(string(got), "create\ndelete\ncreate") {
		t.Errorf("no delete between the creates: calls %q", got)
	}
}
