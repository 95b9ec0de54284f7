package client

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// realSandboxd serves the real sandboxd (REST and gRPC) on a fresh base
// directory and returns the port-forward targets for 8080 and 9090.
func realSandboxd(t *testing.T) (map[string]string, string) {
	t.Helper()
	base := t.TempDir()
	opts := sandboxd.Options{BaseDir: base}
	rest := &http.Server{Handler: sandboxd.NewHandler(opts)}
	restLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rest.Serve(restLn) }()
	t.Cleanup(func() { _ = rest.Close() })
	g := sandboxd.NewGRPCServer(opts)
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(grpcLn) }()
	t.Cleanup(g.Stop)
	return map[string]string{"8080": restLn.Addr().String(), "9090": grpcLn.Addr().String()}, base
}

// WithSandboxd: every public method works over sandboxd's REST API and
// ProcessService, through one port-forward connection to the Pod.
func TestSandboxdTransport(t *testing.T) {
	targets, base := realSandboxd(t)
	api, apiSrv := newFakeAPIServerPorts(t, "sb-1-pod", targets)
	sb, err := portForwardSandbox(t, apiSrv.URL, "sb-1-pod", WithSandboxd())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ctx := ctxFor(t)

	res, err := sb.Run(ctx, `sh -c 'echo "$0 out"; echo err >&2; exit 4' 'quoted arg'`)
	if err != nil || res != (Result{Stdout: "quoted arg out\n", Stderr: "err\n", ExitCode: 4}) {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if res, err := sb.Run(ctx, "no-such-program-anywhere"); err != nil || res.ExitCode != 1 || !strings.HasPrefix(res.Stderr, "Failed to execute command: ") {
		t.Fatalf("Run of a missing program = %+v, %v; want exit 1 and the reason, as the legacy protocol answers", res, err)
	}
	if res, err := sb.Run(ctx, `echo "unterminated`); err != nil || res.ExitCode != 1 {
		t.Fatalf("Run of a command that cannot be split = %+v, %v", res, err)
	}

	if err := sb.Write(ctx, "dir/f.txt", strings.NewReader("round trip")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(base, "dir", "f.txt")); string(got) != "round trip" {
		t.Fatalf("stored %q", got)
	}
	rc, err := sb.Read(ctx, "dir/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "round trip" {
		t.Fatalf("Read = %q", b)
	}
	entries, err := sb.List(ctx, "dir")
	if err != nil || len(entries) != 1 || entries[0].Name != "f.txt" || entries[0].Size != 10 || entries[0].Type != FileTypeFile || entries[0].ModTime.IsZero() {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	if root, err := sb.List(ctx, ""); err != nil || len(root) != 1 || root[0].Type != FileTypeDirectory {
		t.Fatalf("List of the root = %+v, %v", root, err)
	}
	for path, want := range map[string]bool{"dir/f.txt": true, "dir": true, "missing": false} {
		if got, err := sb.Exists(ctx, path); err != nil || got != want {
			t.Errorf("Exists(%q) = %v, %v; want %v", path, got, err, want)
		}
	}
	if _, err := sb.Read(ctx, "dir"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a directory = %v, want ErrNotFound", err)
	}
	if _, err := sb.Read(ctx, "../../etc/passwd"); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("Read outside the root = %v, want ErrAccessDenied", err)
	}

	// The ProcessService itself, for streaming.
	pc, err := sb.ProcessService()
	if err != nil {
		t.Fatal(err)
	}
	stream, err := pc.Start(ctx, &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"echo", "streamed"}}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var exit *processpb.ExitEvent
	for exit == nil {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(ev.GetStdout())
		exit = ev.GetExit()
	}
	if out.String() != "streamed\n" || exit.GetExitCode() != 0 {
		t.Fatalf("Start: %q, exit %d", out.String(), exit.GetExitCode())
	}
	if n := api.upgrades.Load(); n != 1 {
		t.Errorf("%d port-forward connections; want one, shared by the REST and gRPC ports", n)
	}
	_ = sb.Close(ctx)
	if _, err := sb.Run(ctx, "echo"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

// The legacy transport has no ProcessService.
func TestProcessServiceNeedsSandboxd(t *testing.T) {
	_, runtimeSrv := newFakeRuntime(t)
	_, apiSrv := newFakeAPIServer(t, "sb-1-pod", runtimeSrv.Listener.Addr().String())
	sb, err := portForwardSandbox(t, apiSrv.URL, "sb-1-pod")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ProcessService(); err == nil {
		t.Fatal("ProcessService over the legacy protocol: no error")
	}
}
