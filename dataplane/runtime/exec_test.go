package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execute runs a command through POST /execute and decodes the answer.
func (s *sandbox) execute(command string) ExecuteResponse {
	s.t.Helper()
	resp, body := s.do(http.MethodPost, "/execute", "application/json", jsonBody(s.t, map[string]string{"command": command}))
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("execute %q: status %d: %s", command, resp.StatusCode, body)
	}
	res := ExecuteResponse{ExitCode: -1000}
	if err := json.Unmarshal(body, &res); err != nil {
		s.t.Fatalf("execute %q: %v: %s", command, err, body)
	}
	return res
}

func TestExecute(t *testing.T) {
	s := newSandbox(t, Options{})
	s.write("marker.txt", "in the base directory\n")
	s.write("script.sh", "#!/bin/sh\necho script ran in \"$(basename \"$(pwd -P)\")\"\n")
	if err := os.Chmod(filepath.Join(s.base, "script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command   string
		stdout, stderr  string
		exitCode        int
		stderrContains  string
		stdoutUntouched bool
	}{
		{name: "plain", command: "echo hi", stdout: "hi\n"},
		{name: "no shell: variables are literal", command: "echo $HOME ~ *.txt", stdout: "$HOME ~ *.txt\n"},
		{name: "no shell: operators are arguments", command: "echo a | wc -l; rm -rf x && y > z", stdout: "a | wc -l; rm -rf x && y > z\n"},
		{name: "single quotes make one argument", command: `printf [%s] 'a b' c`, stdout: "[a b][c]"},
		{name: "double quotes and escapes", command: `printf [%s] "a \"b\"" c\ d ''`, stdout: `[a "b"][c d][]`},
		{name: "runs in the base directory", command: "cat marker.txt", stdout: "in the base directory\n"},
		{name: "relative program path", command: "./script.sh", stdout: "script ran in app\n"},
		{name: "a shell when asked for one", command: `sh -c "echo $0-ok"`, stdout: "sh-ok\n"},
		{name: "stderr and exit code", command: `sh -c "echo oops >&2; exit 3"`, stderr: "oops\n", exitCode: 3},
		{name: "killed by a signal", command: `sh -c "kill -9 $$"`, exitCode: -9},
		{name: "unterminated quote", command: "echo 'unterminated", exitCode: 1, stderrContains: "Failed to execute command: No closing quotation"},
		{name: "trailing backslash", command: `echo a\`, exitCode: 1, stderrContains: "Failed to execute command: No escaped character"},
		{name: "empty command", command: "  ", exitCode: 1, stderrContains: "Failed to execute command: empty command"},
		{name: "unknown program", command: "no-such-program-xyz arg", exitCode: 1, stderrContains: "Failed to execute command: exec: \"no-such-program-xyz\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.execute(tc.command)
			if got.ExitCode != tc.exitCode || got.Stdout != tc.stdout {
				t.Errorf("%q: exit %d stdout %q stderr %q; want exit %d stdout %q", tc.command, got.ExitCode, got.Stdout, got.Stderr, tc.exitCode, tc.stdout)
			}
			if tc.stderrContains != "" {
				if !strings.Contains(got.Stderr, tc.stderrContains) {
					t.Errorf("%q: stderr %q, want it to contain %q", tc.command, got.Stderr, tc.stderrContains)
				}
			} else if got.Stderr != tc.stderr {
				t.Errorf("%q: stderr %q, want %q", tc.command, got.Stderr, tc.stderr)
			}
		})
	}
}

func TestExecuteBadRequests(t *testing.T) {
	s := newSandbox(t, Options{MaxRequestBytes: 100})
	for _, tc := range []struct {
		name, body string
		status     int
		want       any
	}{
		{"not JSON", "echo hi", http.StatusUnprocessableEntity, nil},
		{"command missing", `{"cmd": "echo hi"}`, http.StatusUnprocessableEntity,
			fieldError([]string{"body", "command"}, "missing", "Field required")},
		{"command not a string", `{"command": ["echo", "hi"]}`, http.StatusUnprocessableEntity, nil},
		{"too large", `{"command": "echo ` + strings.Repeat("x", 200) + `"}`, http.StatusRequestEntityTooLarge,
			message("Request body too large: the limit is 100 bytes")},
	} {
		resp, body := s.do(http.MethodPost, "/execute", "application/json", strings.NewReader(tc.body))
		if tc.want != nil {
			wantJSON(t, resp, body, tc.status, tc.want)
		} else if resp.StatusCode != tc.status || !strings.Contains(string(body), `"detail"`) {
			t.Errorf("%s: %d %s, want %d with a detail", tc.name, resp.StatusCode, body, tc.status)
		}
	}
}

// A timeout kills the command's whole process group: the background sleep
// its shell started dies with it.
func TestExecuteTimeoutKillsProcessGroup(t *testing.T) {
	s := newSandbox(t, Options{ExecTimeout: 500 * time.Millisecond})
	start := time.Now()
	got := s.execute(`sh -c "sleep 100 & echo $! > bg.pid; echo started; sleep 100"`)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the command returned after %s, long past its timeout", took)
	}
	if got.ExitCode != 1 || got.Stdout != "started\n" ||
		!strings.Contains(got.Stderr, "Failed to execute command: Command timed out after 500ms; its process group was killed") {
		t.Errorf("got %+v; want exit 1, the output so far and the timeout in stderr", got)
	}
	waitGone(t, readPID(t, filepath.Join(s.base, "bg.pid")))
}

// A request that ends (the client went away, the server shut down) kills
// its command's process group too.
func TestExecuteCancelKillsProcessGroup(t *testing.T) {
	base := t.TempDir()
	h := New(Options{BaseDir: base}).(*handler)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	got := h.run(ctx, `sh -c "sleep 100 & echo $! > bg.pid; sleep 100"`)
	if got.ExitCode != 1 || !strings.Contains(got.Stderr, "Command cancelled") {
		t.Errorf("got %+v; want exit 1 and the cancellation in stderr", got)
	}
	waitGone(t, readPID(t, filepath.Join(base, "bg.pid")))
}

// A process left running with the output pipes open does not hold the
// answer until the timeout.
func TestExecuteLeftoverProcessDoesNotBlock(t *testing.T) {
	s := newSandbox(t, Options{})
	start := time.Now()
	// The leftover outlives the answer by far: a generous bound still
	// tells the wait delay from waiting for it, on a busy machine too.
	got := s.execute(`sh -c "sleep 60 & echo hi"`)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("answered after %s; want about the %s wait delay", took, waitDelay)
	}
	if got.ExitCode != 0 || got.Stdout != "hi\n" || !strings.Contains(got.Stderr, "output cut short") {
		t.Errorf("got %+v", got)
	}
}

func TestExecuteOutputCapped(t *testing.T) {
	s := newSandbox(t, Options{MaxOutputBytes: 1000})
	got := s.execute(`sh -c "seq 1 20000; seq 1 20000 >&2"`)
	if got.ExitCode != 0 || len(got.Stdout) != 1000 || !strings.HasPrefix(got.Stdout, "1\n2\n3\n") {
		t.Errorf("exit %d, %d bytes of stdout; want exit 0 and the first 1000 bytes", got.ExitCode, len(got.Stdout))
	}
	// seq 1 20000 writes 108894 bytes.
	for _, want := range []string{
		"[stdout truncated: the first 1000 bytes kept, 107894 bytes dropped]",
		"[stderr truncated: the first 1000 bytes kept, 107894 bytes dropped]",
	} {
		if !strings.Contains(got.Stderr, want) {
			t.Errorf("stderr %q does not say %q", got.Stderr[max(0, len(got.Stderr)-200):], want)
		}
	}
}

func TestCappedBufferKeepsWholeCharacters(t *testing.T) {
	b := &CappedBuffer{limit: 5}
	for _, p := range []string{"ab", "cdé", "日本"} { // é is 2 bytes: the limit cuts it
		if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got := b.String(); got != "abcd" {
		t.Errorf("kept %q, want %q", got, "abcd")
	}
	if got, want := b.note("stdout"), "[stdout truncated: the first 4 bytes kept, 8 bytes dropped]"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	var data []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if data, err = os.ReadFile(file); err == nil && strings.HasSuffix(string(data), "\n") {
			break
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %q: %v", file, data, err)
	}
	return pid
}

// waitGone waits until the process is gone (or a zombie nobody reaps yet).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return
		}
		// pid (comm) STATE ...; comm may hold spaces, so look after the last ')'.
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d, started in the command's process group, is still running", pid)
}
