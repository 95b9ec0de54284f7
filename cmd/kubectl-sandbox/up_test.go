package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The stand-in runs detached from another directory: --runtime given as a
// relative path must reach it absolute, and a missing one must fail at once.
func TestStandInRuntimePath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sandbox-runtime"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	o, err := standInOptions(upFlags{runtime: "sandbox-runtime"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "sandbox-runtime"); o.Runtime != want {
		t.Errorf("Runtime = %q; want %q", o.Runtime, want)
	}
	if _, err := standInOptions(upFlags{runtime: "missing/sandbox-runtime"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--runtime") {
		t.Errorf("a missing --runtime: %v; want an error naming the flag", err)
	}
}
