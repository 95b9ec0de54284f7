package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runtimeBin is cmd/sandbox-runtime, built once for the package's tests.
var runtimeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "standin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtimeBin = filepath.Join(dir, "sandbox-runtime")
	build := exec.Command("go", "build", "-o", runtimeBin, "github.com/agentsandbox/reconciler/cmd/sandbox-runtime")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sandbox-runtime: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func spec(sbDir string) processSpec {
	return processSpec{Runtime: runtimeBin, SbDir: sbDir, Env: []string{"FROM_POD=yes"}, FreshLogs: true,
		ShutdownTimeout: time.Second, ReadyTimeout: 10 * time.Second}
}

func post(t *testing.T, port int, command string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/execute", port), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A runtime serves on 127.0.0.1 in the work directory, with the Pod's
// environment; stopping it also kills what its commands left behind in its
// session.
func TestProcessLifecycle(t *testing.T) {
	sbDir := filepath.Join(t.TempDir(), "ns", "sb")
	pid, pp, err := startProcess(context.Background(), spec(sbDir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stopProcess(pid, sbDir, time.Second) }()
	port := pp.legacy
	// The same process serves sandboxd's REST API and gRPC service.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/health", pp.rest))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sandboxd health on port %d: %v %v", pp.rest, resp, err)
	}
	_ = resp.Body.Close()
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", pp.grpc)); err != nil {
		t.Fatalf("sandboxd gRPC port %d: %v", pp.grpc, err)
	} else {
		_ = c.Close()
	}
	// And envd, the E2B SDK's daemon.
	resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", pp.envd))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("envd health on port %d: %v %v", pp.envd, resp, err)
	}
	_ = resp.Body.Close()
	if !alive(pid, sbDir) {
		t.Fatal("alive = false for the runtime just started")
	}
	if alive(pid, filepath.Join(filepath.Dir(sbDir), "other")) {
		t.Error("alive = true for another Sandbox's directory")
	}
	if got := post(t, port, "pwd"); got["stdout"] != filepath.Join(sbDir, workDir)+"\n" {
		t.Errorf("pwd = %v, want the work directory", got)
	}
	if got := post(t, port, "printenv FROM_POD"); got["stdout"] != "yes\n" {
		t.Errorf("printenv FROM_POD = %v", got)
	}
	// A command that leaves a process behind, in a process group of its own.
	post(t, port, "sh -c 'sleep 300 >/dev/null 2>&1 & echo $! > sleeper.pid'")
	data, err := os.ReadFile(filepath.Join(sbDir, workDir, "sleeper.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var sleeper int
	if _, err := fmt.Sscan(string(data), &sleeper); err != nil {
		t.Fatal(err)
	}
	if st, ok := procStat(sleeper); !ok || st.session != pid {
		t.Fatalf("the sleeper %d is not in the runtime's session %d: %+v", sleeper, pid, st)
	}
	if err := stopProcess(pid, sbDir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{pid, sleeper} {
		if st, ok := procStat(p); ok && st.state != 'Z' {
			t.Errorf("process %d still runs after stopProcess", p)
		}
	}
	if out, _ := os.ReadFile(filepath.Join(sbDir, rawLog)); !strings.Contains(string(out), "msg=serving") {
		t.Errorf("the runtime's output is not in %s: %q", rawLog, out)
	}
}

// stopProcess never signals a process that is not the runtime of that
// directory (a PID recorded long ago may be someone else's now), nor its
// session.
func TestStopProcessSparesStrangers(t *testing.T) {
	sbDir := t.TempDir()
	stranger := exec.Command("sleep", "60")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = stranger.Wait(); close(exited) }()
	defer func() { _ = stranger.Process.Kill() }()
	if err := stopProcess(stranger.Process.Pid, sbDir, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("stopProcess killed a process that was not the Sandbox's runtime")
	case <-time.After(200 * time.Millisecond):
	}
}

// A runtime that cannot serve is reported with the end of its output.
func TestStartProcessFails(t *testing.T) {
	sbDir := t.TempDir()
	p := spec(sbDir)
	p.Runtime = "/bin/false"
	if _, _, err := startProcess(context.Background(), p); err == nil || !strings.Contains(err.Error(), "exited before it served") {
		t.Fatalf("startProcess of /bin/false: %v", err)
	}
}

// StopAll stops every runtime recorded under a directory and keeps the
// directories.
func TestStopAll(t *testing.T) {
	dir := t.TempDir()
	var pids []int
	for _, k := range []Key{{"a", "one"}, {"b", "two"}} {
		sbDir := SandboxDir(dir, k)
		pid, pp, err := startProcess(context.Background(), spec(sbDir))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		if err := writeState(sbDir, State{Pod: k.Name, PodUID: "u", PID: pid, Port: pp.legacy, RESTPort: pp.rest, GRPCPort: pp.grpc, EnvdPort: pp.envd}); err != nil {
			t.Fatal(err)
		}
	}
	if err := StopAll(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, k := range []Key{{"a", "one"}, {"b", "two"}} {
		if alive(pids[i], SandboxDir(dir, k)) {
			t.Errorf("%v: runtime %d still runs", k, pids[i])
		}
		st, err := readState(SandboxDir(dir, k))
		if err != nil || st.PID != 0 || st.PodUID != "u" {
			t.Errorf("%v: state after StopAll %+v, %v; want the PID cleared and the Pod kept", k, st, err)
		}
	}
}

// A runtime the stand-in starts listens on the developer's machine: it
// answers requests addressed to this machine, to an IP address (a Pod IP,
// from the router's port-forward transport) or to its Pod's name (the Go
// SDK's port-forward mode), and refuses the Host a page that DNS rebinding
// pointed at it sends, and pages of other sites: on the legacy protocol and
// on sandboxd's REST API alike.
func TestProcessRefusesBrowsers(t *testing.T) {
	sbDir := filepath.Join(t.TempDir(), "ns", "sb")
	sp := spec(sbDir)
	sp.Pod = "sb-pod"
	pid, pp, err := startProcess(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stopProcess(pid, sbDir, time.Second) }()
	for _, c := range []struct {
		name   string
		port   int
		method string
		path   string
		body   string
		ok     int
	}{
		{"legacy", pp.legacy, http.MethodPost, "/execute", `{"command": "touch ran"}`, http.StatusOK},
		{"sandboxd", pp.rest, http.MethodPut, "/v1/files/ran", "x", http.StatusNoContent},
	} {
		send := func(host, origin string) int {
			req, _ := http.NewRequest(c.method, fmt.Sprintf("http://127.0.0.1:%d%s", c.port, c.path), strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Host = host
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		for _, tc := range []struct{ host, origin string }{
			{"attacker.example:" + fmt.Sprint(c.port), ""},
			{"attacker.example:" + fmt.Sprint(c.port), "http://attacker.example:" + fmt.Sprint(c.port)},
			{"other-pod:8888", ""},
			{fmt.Sprintf("127.0.0.1:%d", c.port), "https://attacker.example"},
		} {
			if got := send(tc.host, tc.origin); got != http.StatusForbidden {
				t.Errorf("%s: Host %s, Origin %q: %d, want 403", c.name, tc.host, tc.origin, got)
			}
		}
		if _, err := os.Stat(filepath.Join(sbDir, workDir, "ran")); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused request ran its command or wrote its file (%v)", c.name, err)
		}
		for _, host := range []string{fmt.Sprintf("localhost:%d", c.port), fmt.Sprintf("127.0.0.1:%d", c.port), "10.0.0.7:8888", "sb-pod:8080"} {
			if got := send(host, ""); got != c.ok {
				t.Errorf("%s: Host %s: %d, want %d", c.name, host, got, c.ok)
			}
		}
		if err := os.Remove(filepath.Join(sbDir, workDir, "ran")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	for pod, want := range map[string]string{"": "localhost", "sb-1": "localhost,sb-1", "evil.example": "localhost"} {
		if got := allowedHosts(pod); got != want {
			t.Errorf("allowedHosts(%q) = %q, want %q", pod, got, want)
		}
	}
}

// The runtime's four ports are distinct, free loopback ports.
func TestFreePortsAreDistinct(t *testing.T) {
	for range 20 {
		pp, err := freePorts()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range []int{pp.legacy, pp.rest, pp.grpc, pp.envd} {
			if p == 0 || seen[p] {
				t.Fatalf("freePorts = %+v: want four distinct ports", pp)
			}
			seen[p] = true
			l, err := net.Listen("tcp", net.JoinHostPort(Loopback, strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d of %+v is not free once chosen: %v", p, pp, err)
			}
			_ = l.Close()
		}
	}
}
