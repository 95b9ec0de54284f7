package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, env map[string]string, args ...string) options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.bind(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOptions(t *testing.T) {
	o := parse(t, nil)
	if o.listenAddr != ":8888" || o.baseDir != "/app" || o.execTimeout != 300*time.Second ||
		o.maxOutputBytes != 8<<20 || o.maxUploadBytes != 256<<20 || o.validate() != nil {
		t.Errorf("defaults: %+v, %v", o, o.validate())
	}
	env := map[string]string{
		"SANDBOX_BASE_DIR": "/work", "SANDBOX_EXEC_TIMEOUT_SECONDS": "2.5", "SANDBOX_MAX_OUTPUT_BYTES": "100",
		"SANDBOX_MAX_UPLOAD_BYTES": "200", "SANDBOX_LISTEN_ADDRESS": "127.0.0.1:9999",
	}
	o = parse(t, env)
	if o.baseDir != "/work" || o.execTimeout != 2500*time.Millisecond || o.maxOutputBytes != 100 ||
		o.maxUploadBytes != 200 || o.listenAddr != "127.0.0.1:9999" || o.validate() != nil {
		t.Errorf("from the environment: %+v, %v", o, o.validate())
	}
	o = parse(t, env, "--base-dir=/flag", "--exec-timeout=1m", "--max-upload-bytes=300")
	if o.baseDir != "/flag" || o.execTimeout != time.Minute || o.maxUploadBytes != 300 {
		t.Errorf("flags over the environment: %+v", o)
	}
	o = parse(t, map[string]string{"SANDBOX_EXEC_TIMEOUT_SECONDS": "soon", "SANDBOX_MAX_OUTPUT_BYTES": "-1"},
		"--max-upload-bytes=0", "--read-timeout=0s", "--base-dir=")
	err := o.validate()
	for _, want := range []string{
		`$SANDBOX_EXEC_TIMEOUT_SECONDS="soon": want a positive number of seconds`,
		`$SANDBOX_MAX_OUTPUT_BYTES="-1": want a positive number of bytes`,
		"--max-upload-bytes=0: must be positive", "--read-timeout=0s: must be positive", "--base-dir must not be empty",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate() = %v, want it to say %q", err, want)
		}
	}
}

// SIGTERM (ctx ending) lets a running command finish for the grace period,
// then kills its process group; the server then returns.
func TestServeShutdownKillsRunningCommands(t *testing.T) {
	o := parse(t, nil, "--base-dir="+t.TempDir(), "--shutdown-timeout=300ms")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, listeners{legacy: ln}, slog.New(slog.DiscardHandler)) }()
	url := "http://" + ln.Addr().String()

	resp, err := http.Get(url + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", resp, err)
	}
	_ = resp.Body.Close()

	answered := make(chan string, 1)
	go func() {
		resp, err := http.Post(url+"/execute", "application/json",
			strings.NewReader(`{"command": "sh -c \"sleep 100 & echo $! > bg.pid; sleep 100\""}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		answered <- string(body)
	}()
	pid := readPID(t, filepath.Join(o.baseDir, "bg.pid"))
	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	if got := <-answered; !strings.Contains(got, "Command cancelled") {
		t.Errorf("the running request got %q, want its cancellation", got)
	}
	// Gone, or a zombie nobody has reaped yet.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d of the killed command still runs: %s", pid, stat)
		}
	}
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(file)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("%s never appeared", file)
	return 0
}

// A command may run longer than --write-timeout: /execute extends its own
// write deadline.
func TestServeExecuteOutlivesWriteTimeout(t *testing.T) {
	o := parse(t, nil, "--base-dir="+t.TempDir(), "--write-timeout=300ms")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, listeners{legacy: ln}, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	resp, err := http.Post("http://"+ln.Addr().String()+"/execute", "application/json",
		strings.NewReader(`{"command": "sh -c \"sleep 1; echo late\""}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"stdout":"late\n"`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// The token comes from --auth-token-file, else $SANDBOX_RUNTIME_TOKEN; the
// allowed hosts from --allowed-hosts or $SANDBOX_ALLOWED_HOSTS.
func TestTokenAndHostOptions(t *testing.T) {
	o := parse(t, nil)
	if err := o.validate(); err != nil || o.token != "" || o.hosts != nil {
		t.Errorf("defaults: token %q, hosts %v, %v", o.token, o.hosts, err)
	}
	o = parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": " from-env\n", "SANDBOX_ALLOWED_HOSTS": "sandbox.test"})
	if err := o.validate(); err != nil || o.token != "from-env" || !o.hosts.Allowed("sandbox.test:8888") || o.hosts.Allowed("attacker.example") {
		t.Errorf("from the environment: token %q, hosts %v, %v", o.token, o.hosts, err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": "from-env"}, "--auth-token-file="+file, "--allowed-hosts=a.test, b.test")
	if err := o.validate(); err != nil || o.token != "from-file" || !o.hosts.Allowed("b.test") {
		t.Errorf("flags: token %q, hosts %v, %v", o.token, o.hosts, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		"--auth-token-file=" + empty:                 "is empty",
		"--auth-token-file=" + empty + ".missing":    "no such file",
		"--allowed-hosts=http://attacker.example:80": `allowed host "http://attacker.example:80"`,
	} {
		o = parse(t, nil, args)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: validate() = %v, want %q", args, err, want)
		}
	}
}

// The binary's server refuses requests without the token and runs those
// with it.
func TestServeRequiresToken(t *testing.T) {
	o := parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": "tok"}, "--base-dir="+t.TempDir(), "--allowed-hosts=localhost")
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, listeners{legacy: ln}, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	post := func(host, token string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/execute", strings.NewReader(`{"command": "true"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Sandbox-Runtime-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("localhost", ""); got != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", got)
	}
	if got := post("attacker.example", "tok"); got != http.StatusForbidden {
		t.Errorf("Host attacker.example: %d, want 403", got)
	}
	if got := post("localhost", "tok"); got != http.StatusOK {
		t.Errorf("with the token: %d, want 200", got)
	}
}
