package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// tunnel is a sandbox reached as upstream's Go SDK reaches it with
// `Runtime: sandboxd`: one client-go port-forward straight to the Pod's
// ports 8080 (REST) and 9090 (gRPC).
type tunnel struct {
	c          *Claimed
	rest, grpc string // 127.0.0.1:PORT
	opened     time.Duration
}

func openTunnel(t *testing.T) *tunnel {
	t.Helper()
	c := claimSandbox(t)
	begin := time.Now()
	ports := forwardPod(t, c.Namespace, c.Pod, standin.SandboxdRESTPort, standin.SandboxdGRPCPort)
	tu := &tunnel{c: c, rest: "127.0.0.1:" + strconv.Itoa(ports[standin.SandboxdRESTPort]),
		grpc: "127.0.0.1:" + strconv.Itoa(ports[standin.SandboxdGRPCPort])}
	eventually(t, time.Minute, "GET /v1/health through the pod tunnel", func() error {
		r, err := trySend(tu.rest, Wire{Method: http.MethodGet, Target: "/v1/health", Headers: goSDKTunnelHeaders("", nil)})
		if err == nil && r.Status != http.StatusOK {
			err = fmt.Errorf("%w %d %s", errStatus, r.Status, r.Body)
		}
		return err
	})
	tu.opened = c.Opened + time.Since(begin)
	return tu
}

func (tu *tunnel) req(method, target, contentType string, body []byte) Wire {
	return Wire{Method: method, Target: target, Headers: goSDKTunnelHeaders(contentType, body), Body: body}
}

// TestSandboxdREST replays the Go SDK's sandboxd file calls (and the
// health and metadata endpoints) over the pod tunnel, byte for byte:
// upstream sandboxd's answers are encoding/json's (a trailing newline),
// its error bodies {"code", "message"} with its messages.
func TestSandboxdREST(t *testing.T) {
	tu := openTunnel(t)
	t.Logf("sandboxd over the pod tunnel: open -> REST answering %s", tu.opened.Round(time.Millisecond))
	do := func(method, target, contentType string, body []byte) Reply {
		t.Helper()
		return send(t, tu.rest, tu.req(method, target, contentType, body))
	}
	none := map[string]string{}
	asJSON := map[string]string{"Content-Type": "application/json"}

	// PUT: raw bytes with a mode, into a directory that does not exist yet.
	expect(t, "PUT dir%2Fa.txt?mode=0600", do(http.MethodPut, "/v1/files/dir%2Fa.txt?mode=0600", "application/octet-stream", []byte("through 8080\n")),
		http.StatusNoContent, none, "")
	// PUT: multipart, part "file".
	const boundary = "0d9e1b3c5a7f4c2a0d9e1b3c5a7f4c2a0d9e1b3c5a7f4c2a0d9e1b3c5a7f"
	expect(t, "PUT dir%2Fb.txt (multipart)", do(http.MethodPut, "/v1/files/dir%2Fb.txt", "multipart/form-data; boundary="+boundary,
		goMultipart(boundary, "b.txt", []byte("multi"))), http.StatusNoContent, none, "")

	// GET a file: its bytes as application/octet-stream.
	r := do(http.MethodGet, "/v1/files/dir%2Fa.txt", "", nil)
	expect(t, "GET dir%2Fa.txt", r, http.StatusOK, map[string]string{"Content-Type": "application/octet-stream", "Content-Length": "13"}, "through 8080\n")
	if r.Header.Get("Last-Modified") == "" {
		t.Errorf("GET dir%%2Fa.txt: no Last-Modified")
	}
	expect(t, "GET dir/b.txt (a literal slash)", do(http.MethodGet, "/v1/files/dir/b.txt", "", nil), http.StatusOK, nil, "multi")

	// HEAD: the SDK's Exists.
	expect(t, "HEAD dir%2Fa.txt", do(http.MethodHead, "/v1/files/dir%2Fa.txt", "", nil), http.StatusOK, map[string]string{"Content-Length": "13"}, "")
	expect(t, "HEAD dir%2Fmissing", do(http.MethodHead, "/v1/files/dir%2Fmissing", "", nil), http.StatusNotFound, none, "")

	// GET a directory: its listing.
	r = do(http.MethodGet, "/v1/files/dir", "", nil)
	listing := regexp.MustCompile(`^\{"path":"/dir","entries":\[` +
		`\{"name":"a\.txt","size":13,"type":"file","modified_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","mode":"0600"\},` +
		`\{"name":"b\.txt","size":5,"type":"file","modified_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","mode":"0644"\}\]\}` + "\n$")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" || !listing.Match(r.Body) {
		t.Errorf("GET /v1/files/dir: %d %q %q; want 200 application/json %s", r.Status, r.Header.Get("Content-Type"), r.Body, listing)
	}

	// Errors, with upstream's codes and messages.
	for _, tc := range []struct {
		what, method, target string
		status               int
		body                 string
	}{
		{"a bad mode", http.MethodPut, "/v1/files/c.txt?mode=0999", http.StatusBadRequest,
			`{"code":"INVALID_ARGUMENT","message":"mode \"0999\" must match ^0[0-7]{3}$"}`},
		{"PUT onto a directory", http.MethodPut, "/v1/files/dir", http.StatusBadRequest,
			`{"code":"INVALID_ARGUMENT","message":"target path is a directory"}`},
		{"GET a missing file", http.MethodGet, "/v1/files/missing.txt", http.StatusNotFound,
			`{"code":"NOT_FOUND","message":"path does not exist within the sandbox"}`},
		{"DELETE a missing file", http.MethodDelete, "/v1/files/missing.txt", http.StatusNotFound,
			`{"code":"NOT_FOUND","message":"path does not exist within the sandbox"}`},
		{"DELETE a non-empty directory", http.MethodDelete, "/v1/files/dir", http.StatusConflict,
			`{"code":"CONFLICT","message":"directory is not empty; pass recursive=true to remove it"}`},
		{"DELETE recursive=false", http.MethodDelete, "/v1/files/dir?recursive=false", http.StatusConflict,
			`{"code":"CONFLICT","message":"directory is not empty; pass recursive=true to remove it"}`},
		{"GET ..%2F..%2Fetc%2Fpasswd", http.MethodGet, "/v1/files/..%2F..%2Fetc%2Fpasswd", http.StatusForbidden,
			`{"code":"PERMISSION_DENIED","message":"path traversal outside sandbox root is forbidden"}`},
		{"PUT %2E%2E%2Fescape.txt", http.MethodPut, "/v1/files/%2E%2E%2Fescape.txt", http.StatusForbidden,
			`{"code":"PERMISSION_DENIED","message":"path traversal outside sandbox root is forbidden"}`},
		{"DELETE ..%2Fsomething", http.MethodDelete, "/v1/files/..%2Fsomething", http.StatusForbidden,
			`{"code":"PERMISSION_DENIED","message":"path traversal outside sandbox root is forbidden"}`},
	} {
		var body []byte
		if tc.method == http.MethodPut {
			body = []byte("x")
		}
		expect(t, tc.what, do(tc.method, tc.target, "application/octet-stream", body), tc.status, asJSON, tc.body+"\n")
	}

	// DELETE: a file, then the directory with recursive=true.
	expect(t, "DELETE dir%2Fb.txt", do(http.MethodDelete, "/v1/files/dir%2Fb.txt", "", nil), http.StatusNoContent, none, "")
	expect(t, "DELETE dir?recursive=true", do(http.MethodDelete, "/v1/files/dir?recursive=true", "", nil), http.StatusNoContent, none, "")
	expect(t, "HEAD dir", do(http.MethodHead, "/v1/files/dir", "", nil), http.StatusNotFound, none, "")

	// Health and metadata.
	r = do(http.MethodGet, "/v1/health", "", nil)
	if !regexp.MustCompile(`^\{"status":"ok","uptime_seconds":\d+\}`+"\n$").Match(r.Body) || r.Status != http.StatusOK {
		t.Errorf("GET /v1/health: %d %q", r.Status, r.Body)
	}
	r = do(http.MethodGet, "/v1/metadata", "", nil)
	var meta map[string]map[string]string
	if err := json.Unmarshal(r.Body, &meta); err != nil || r.Status != http.StatusOK || len(meta) != 1 || meta["env"] == nil {
		t.Errorf("GET /v1/metadata: %d %q; want 200 {\"env\": {...}}", r.Status, r.Body)
	}
	for k := range meta["env"] {
		if regexp.MustCompile(`TOKEN|SECRET|PASSWORD|CREDENTIAL|KEY`).MatchString(k) {
			t.Errorf("GET /v1/metadata serves %s", k)
		}
	}
}

// TestSandboxdProcessService drives process.v1.ProcessService over the
// pod tunnel with the generated client, as the Go SDK does: Start's
// stream (init first, output, exit last), Execute, WriteStdin with eof,
// SendSignal, and ResizeTTY on a PTY.
func TestSandboxdProcessService(t *testing.T) {
	tu := openTunnel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc, err := grpc.NewClient(tu.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	pc := processpb.NewProcessServiceClient(cc)
	cmd := func(args ...string) *processpb.ProcessConfig { return &processpb.ProcessConfig{Command: args} }

	// Execute, as the SDK's Run: /bin/sh -c <command>.
	res, err := pc.Execute(ctx, &processpb.ExecuteRequest{Config: cmd("/bin/sh", "-c", "echo out; echo err >&2; exit 3")})
	if err != nil || string(res.GetStdout()) != "out\n" || string(res.GetStderr()) != "err\n" || res.GetExitCode() != 3 {
		t.Fatalf("Execute = %v, %v; want stdout out, stderr err, exit 3", res, err)
	}
	cwd := "."
	res, err = pc.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{
		Command: []string{"/bin/sh", "-c", "echo $GREETING"}, EnvVars: map[string]string{"GREETING": "hello"}, Cwd: &cwd}})
	if err != nil || string(res.GetStdout()) != "hello\n" || res.GetExitCode() != 0 {
		t.Errorf("Execute with env_vars and cwd = %v, %v", res, err)
	}

	// Start: init, then output, then exit.
	s := start(ctx, t, pc, &processpb.StartRequest{Config: cmd("/bin/sh", "-c", "echo hi; echo oops >&2")})
	s.waitExit(t)
	if s.events[0] != "init" || s.events[len(s.events)-1] != "exit" || s.stdout != "hi\n" || s.stderr != "oops\n" || s.exit != 0 {
		t.Errorf("Start echo: events %v, stdout %q, stderr %q, exit %d", s.events, s.stdout, s.stderr, s.exit)
	}

	// WriteStdin: bytes, then eof, to cat.
	s = start(ctx, t, pc, &processpb.StartRequest{Config: cmd("cat")})
	if _, err := pc.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("to stdin\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Eof{}}); err != nil {
		t.Fatal(err)
	}
	s.waitExit(t)
	if s.stdout != "to stdin\n" || s.exit != 0 {
		t.Errorf("cat with WriteStdin: stdout %q exit %d", s.stdout, s.exit)
	}

	// SendSignal: SIGTERM ends sleep.
	s = start(ctx, t, pc, &processpb.StartRequest{Config: cmd("sleep", "60")})
	if _, err := pc.SendSignal(ctx, &processpb.SendSignalRequest{ProcessId: s.pid, Signal: processpb.Signal_SIGNAL_SIGTERM}); err != nil {
		t.Fatal(err)
	}
	s.waitExit(t)
	if s.exit == 0 {
		t.Errorf("sleep after SIGTERM exited 0")
	}
	t.Logf("sleep ended by SIGTERM: exit_code %d", s.exit)

	// A PTY: its size, then ResizeTTY and the new size.
	s = start(ctx, t, pc, &processpb.StartRequest{Config: cmd("/bin/sh", "-c", "stty size; read line; stty size"), Pty: &processpb.PTY{Cols: 80, Rows: 24}})
	s.waitOutput(t, "24 80")
	if _, err := pc.ResizeTTY(ctx, &processpb.ResizeTTYRequest{ProcessId: s.pid, Cols: 100, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("\n")}}); err != nil {
		t.Fatal(err)
	}
	s.waitExit(t)
	if !regexp.MustCompile(`40 100`).MatchString(s.stdout) || s.exit != 0 {
		t.Errorf("PTY after ResizeTTY 100x40: output %q exit %d", s.stdout, s.exit)
	}
}
