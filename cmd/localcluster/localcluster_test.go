package localcluster

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.state")
	want := state{ControllerPID: 42, Marker: "/w/clusters/x/kubeconfig.yaml", Metrics: "127.0.0.1:1", LogPath: "/w/x.log", Kubeconfig: "/k", Kind: true}
	if err := writeState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("state: got %+v, want %+v", got, want)
	}
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindBinary(dir, "kwokctl"); err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("missing binary: error %v should name the directory and how to build it", err)
	}
	p := filepath.Join(dir, "kwokctl")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBinary(dir, "kwokctl"); err == nil {
		t.Fatal("a file that is not executable was accepted")
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindBinary(dir, "kwokctl"); err != nil || got != p {
		t.Fatalf("FindBinary = %q, %v; want %q", got, err, p)
	}
}

// StopPID signals only the process whose command line still carries the
// marker, and waits for it to exit.
func TestStopPID(t *testing.T) {
	marker := "localcluster-test-" + t.Name()
	cmd := exec.Command("sh", "-c", "sleep 60; : "+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if Alive(cmd.Process.Pid, "some-other-marker") {
		t.Fatal("Alive ignored the marker")
	}
	if err := StopPID(cmd.Process.Pid, "some-other-marker", time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a process without the marker was stopped")
	case <-time.After(200 * time.Millisecond):
	}
	if !Alive(cmd.Process.Pid, marker) {
		t.Fatal("Alive: the process with the marker is not alive")
	}
	if err := StopPID(cmd.Process.Pid, marker, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := StopPID(cmd.Process.Pid, marker, time.Second); err != nil {
		t.Fatalf("stopping a process that is gone: %v", err)
	}
}

// Down on a working directory without a cluster has nothing to do and says so.
func TestDownNothing(t *testing.T) {
	var out bytes.Buffer
	if err := Down(context.Background(), t.TempDir(), "none", "", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to stop") {
		t.Fatalf("output %q", out.String())
	}
}

func TestUpRefusesMissingController(t *testing.T) {
	_, err := Up(context.Background(), UpOptions{
		Options:    Options{Name: "x", Workdir: t.TempDir()},
		Controller: filepath.Join(t.TempDir(), "sandbox-controller"),
	})
	if err == nil || !strings.Contains(err.Error(), "make controller") {
		t.Fatalf("Up with a missing controller: %v", err)
	}
}
