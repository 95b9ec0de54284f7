package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// sandboxd is behind the legacy protocol's guard: with a token, every REST
// request but GET /v1/health and every gRPC call needs it; a Host outside
// --allowed-hosts and a page of another site are refused on REST; and
// /v1/metadata never shows the token.
func TestServeGuardsSandboxd(t *testing.T) {
	const token = "s3cret-runtime-token"
	o := parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": token}, "--base-dir="+t.TempDir(), "--allowed-hosts=localhost,pod-a")
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	l := listeners{rest: listen(t), grpc: listen(t)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, l, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	rest := func(method, path, host, tok string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+l.rest.Addr().String()+path, strings.NewReader("x"))
		req.Host = host
		if tok != "" {
			req.Header.Set("X-Sandbox-Runtime-Token", tok)
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
	code := func(body string) string {
		var e struct{ Code string }
		_ = json.Unmarshal([]byte(body), &e)
		return e.Code
	}
	for _, c := range []struct {
		name, method, path, host, tok string
		hdr                           map[string]string
		want                          int
		wantCode                      string
	}{
		{"health without token", http.MethodGet, "/v1/health", "localhost", "", nil, http.StatusOK, ""},
		{"metadata without token", http.MethodGet, "/v1/metadata", "localhost", "", nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"PUT without token", http.MethodPut, "/v1/files/a.txt", "localhost", "", nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"GET with a wrong token", http.MethodGet, "/v1/files/", "localhost", "wrong", nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"root without token", http.MethodGet, "/", "localhost", "", nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"PUT with the token", http.MethodPut, "/v1/files/a.txt", "pod-a:8080", token, nil, http.StatusNoContent, ""},
		{"GET with the token", http.MethodGet, "/v1/files/a.txt", "127.0.0.1", token, nil, http.StatusOK, ""},
		{"foreign Host", http.MethodGet, "/v1/files/a.txt", "attacker.example", token, nil, http.StatusForbidden, "PERMISSION_DENIED"},
		{"foreign Host, health", http.MethodGet, "/v1/health", "attacker.example:8080", "", nil, http.StatusForbidden, "PERMISSION_DENIED"},
		{"cross-site page", http.MethodGet, "/v1/files/a.txt", "localhost", token, map[string]string{"Origin": "https://evil.example"},
			http.StatusForbidden, "PERMISSION_DENIED"},
	} {
		got, body := rest(c.method, c.path, c.host, c.tok, c.hdr)
		if got != c.want || (c.wantCode != "" && code(body) != c.wantCode) {
			t.Errorf("%s: %d %s, want %d %s", c.name, got, body, c.want, c.wantCode)
		}
	}
	got, body := rest(http.MethodGet, "/v1/metadata", "localhost", token, nil)
	if got != http.StatusOK || strings.Contains(body, token) || !strings.Contains(body, "SANDBOX_BASE_DIR") {
		t.Errorf("/v1/metadata with the token: %d %s, want 200 with the settings and without the token", got, body)
	}

	cc, err := grpc.NewClient(l.grpc.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	pc := processpb.NewProcessServiceClient(cc)
	callCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	withToken := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(callCtx, "x-sandbox-runtime-token", tok)
	}
	cat := &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"cat", "a.txt"}}}
	for name, ctx := range map[string]context.Context{"without token": callCtx, "with a wrong token": withToken("wrong")} {
		if _, err := pc.Execute(ctx, cat); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Execute %s: %v, want Unauthenticated", name, err)
		}
		stream, err := pc.Start(ctx, &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"true"}}})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Start %s: %v, want Unauthenticated", name, err)
		}
	}
	res, err := pc.Execute(withToken(token), cat)
	if err != nil || string(res.GetStdout()) != "x" {
		t.Errorf("Execute with the token: %v %v, want the file's bytes", res, err)
	}
	stream, err := pc.Start(withToken(token), &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"true"}}})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Errorf("Start with the token: %v", err)
	}
}
