package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb/filesystempbconnect"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb/processpbconnect"
)

// withHeaders is an http.RoundTripper adding headers to every request.
type withHeaders map[string]string

func (h withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// envd is behind the runtime's guard: with a token, every RPC and /files
// needs it (an E2B access token or a Basic user is no substitute) but GET
// /health does not; a foreign Host and a page of another site are refused.
// It shares the base directory with the legacy protocol.
func TestServeGuardsEnvd(t *testing.T) {
	const token = "s3cret-runtime-token"
	dir := t.TempDir()
	o := parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": token}, "--base-dir="+dir, "--allowed-hosts=localhost")
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	l := listeners{legacy: listen(t), envd: listen(t)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, l, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := "http://" + l.envd.Addr().String()
	get := func(path string, hdr map[string]string, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, _ := get("/health", nil, ""); status != http.StatusNoContent {
		t.Errorf("health without a token: %d, want 204", status)
	}
	for _, hdr := range []map[string]string{nil, {"X-Access-Token": token}, {"Authorization": "Basic dXNlcjo="}, {"X-Sandbox-Runtime-Token": "wrong"}} {
		if status, _ := get("/files?path=x", hdr, ""); status != http.StatusUnauthorized {
			t.Errorf("/files with %v: %d, want 401", hdr, status)
		}
	}
	ok := map[string]string{"X-Sandbox-Runtime-Token": token, "Authorization": "Basic dXNlcjo="}
	if status, _ := get("/health", ok, "evil.example:49983"); status != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", status)
	}
	if status, _ := get("/files?path=x", map[string]string{"X-Sandbox-Runtime-Token": token, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, ""); status != http.StatusForbidden {
		t.Errorf("cross-site page: %d, want 403", status)
	}

	unauth := filesystempbconnect.NewFilesystemClient(http.DefaultClient, base, connect.WithProtoJSON())
	if _, err := unauth.Stat(context.Background(), connect.NewRequest(&filesystempb.StatRequest{Path: "/"})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Stat without the token: %v, want unauthenticated", err)
	}
	client := &http.Client{Transport: withHeaders(ok)}
	fs := filesystempbconnect.NewFilesystemClient(client, base, connect.WithProtoJSON())
	procs := processpbconnect.NewProcessClient(client, base, connect.WithProtoJSON())
	if _, err := fs.MakeDir(context.Background(), connect.NewRequest(&filesystempb.MakeDirRequest{Path: "/made-by-envd"})); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + l.legacy.Addr().String() + "/exists/made-by-envd")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // the legacy protocol wants the token too
	req, _ := http.NewRequest(http.MethodGet, "http://"+l.legacy.Addr().String()+"/exists/made-by-envd", nil)
	req.Header.Set("X-Sandbox-Runtime-Token", token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `"exists":true`) {
		t.Errorf("the legacy protocol does not see envd's directory: %s", body)
	}
	st, err := procs.Start(context.Background(), connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo \"${SANDBOX_RUNTIME_TOKEN:-no token}\""}}}))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for st.Receive() {
		out.Write(st.Msg().GetEvent().GetData().GetStdout())
	}
	if out.String() != "no token\n" {
		t.Errorf("a command saw %q, want no token", out.String())
	}
}

// On shutdown, programs started through envd die too, background ones
// (whose stream is gone) included.
func TestServeShutdownKillsEnvdPrograms(t *testing.T) {
	o := parse(t, nil, "--base-dir="+t.TempDir(), "--shutdown-timeout=300ms")
	l := listeners{envd: listen(t)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, l, slog.New(slog.DiscardHandler)) }()
	procs := processpbconnect.NewProcessClient(http.DefaultClient, "http://"+l.envd.Addr().String(), connect.WithProtoJSON())
	var pids []int
	for range 2 {
		st, err := procs.Start(context.Background(), connect.NewRequest(&processpb.StartRequest{
			Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "sleep 100"}}}))
		if err != nil || !st.Receive() {
			t.Fatal(err, st.Err())
		}
		pids = append(pids, int(st.Msg().GetEvent().GetStart().GetPid()))
		if len(pids) == 1 {
			_ = st.Close() // a background command
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	for _, pid := range pids {
		for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("envd's program %d outlived the shutdown", pid)
			}
		}
	}
}
