package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
)

// runMainEnv makes the test binary run the runtime's main instead of the
// tests: how TestTokenNotInProcessEnvironment starts the runtime as a
// process of its own.
const runMainEnv = "SANDBOX_RUNTIME_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestTokenNotInProcessEnvironment plays a command run in the sandbox,
// which reads the environment the runtime process started with
// (/proc/<pid>/environ, readable by every process of its user: a sandbox's
// commands run as the runtime's user), where $SANDBOX_RUNTIME_TOKEN was.
// The runtime, started as the Pod starts it, is another process by then
// (the same PID) without it, and still asks requests for the token.
func TestTokenNotInProcessEnvironment(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("/proc/<pid>/environ is Linux's")
	}
	const token = "s3cret-runtime-token-4f2a"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.Command(os.Args[0], "--listen-address="+addr, "--base-dir="+t.TempDir(), "--allowed-hosts=localhost")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "SANDBOX_RUNTIME_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the runtime's stderr:\n%s", stderr.String())
		}
	})
	execute := func(command, tok string) (int, string) {
		body, _ := json.Marshal(map[string]string{"command": command})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/execute", bytes.NewReader(body))
		req.Host = "localhost"
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("X-Sandbox-Runtime-Token", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		var out struct {
			Stdout string `json:"stdout"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Stdout
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := execute("true", token); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the runtime never served")
		}
		time.Sleep(50 * time.Millisecond)
	}
	environ := filepath.Join("/proc", fmt.Sprint(cmd.Process.Pid), "environ")
	code, out := execute("cat "+environ, token)
	if code != http.StatusOK || !strings.Contains(out, runMainEnv) {
		t.Fatalf("a command reading %s: %d %q", environ, code, out)
	}
	if strings.Contains(out, token) || strings.Contains(out, "SANDBOX_RUNTIME_TOKEN=") {
		t.Errorf("a command read the runtime token in the runtime's %s", environ)
	}
	if code, _ := execute("true", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
}
