package sandboxd

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// newGRPC serves the ProcessService on a real listener and returns a
// client made with the generated code.
func newGRPC(t *testing.T, opts Options, serverOpts ...grpc.ServerOption) (processpb.ProcessServiceClient, string) {
	t.Helper()
	if opts.BaseDir == "" {
		opts.BaseDir = t.TempDir()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewGRPCServer(opts, serverOpts...)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return processpb.NewProcessServiceClient(cc), opts.BaseDir
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func cfg(argv ...string) *processpb.ProcessConfig { return &processpb.ProcessConfig{Command: argv} }

// started is a Start stream whose InitEvent has been read.
type started struct {
	stream grpc.ServerStreamingClient[processpb.StartResponse]
	pid    int32
}

func start(t *testing.T, ctx context.Context, c processpb.ProcessServiceClient, req *processpb.StartRequest) started {
	t.Helper()
	stream, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	if first.GetInit() == nil || first.GetInit().GetProcessId() <= 0 {
		t.Fatalf("first event %v, want an InitEvent with a process id", first)
	}
	return started{stream: stream, pid: first.GetInit().GetProcessId()}
}

// until reads events until stdout matches re (or the stream ends).
func (s started) until(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var out strings.Builder
	for !re.MatchString(out.String()) {
		ev, err := s.stream.Recv()
		if err != nil {
			t.Fatalf("waiting for %v in %q: %v", re, out.String(), err)
		}
		if ev.GetExit() != nil {
			t.Fatalf("exited (%d) before %v appeared in %q", ev.GetExit().GetExitCode(), re, out.String())
		}
		out.Write(ev.GetStdout())
	}
	return out.String()
}

// rest reads the stream to its end: stdout, stderr, the exit code, and
// whether anything came after the ExitEvent or before it twice.
func (s started) rest(t *testing.T) (stdout, stderr string, code int32) {
	t.Helper()
	var out, errOut strings.Builder
	exits := 0
	for {
		ev, err := s.stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.GetEvent().(type) {
		case *processpb.StartResponse_Init:
			t.Fatal("a second InitEvent")
		case *processpb.StartResponse_Stdout:
			if exits > 0 {
				t.Fatal("output after the ExitEvent")
			}
			out.Write(e.Stdout)
		case *processpb.StartResponse_Stderr:
			if exits > 0 {
				t.Fatal("output after the ExitEvent")
			}
			errOut.Write(e.Stderr)
		case *processpb.StartResponse_Exit:
			exits++
			code = e.Exit.GetExitCode()
		}
	}
	if exits != 1 {
		t.Fatalf("%d ExitEvents, want 1", exits)
	}
	return out.String(), errOut.String(), code
}

func TestStartStreamsInitOutputExit(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx := testContext(t)
	s := start(t, ctx, c, &processpb.StartRequest{Config: cfg("sh", "-c", "echo out; echo err >&2; exit 3")})
	stdout, stderr, code := s.rest(t)
	if stdout != "out\n" || stderr != "err\n" || code != 3 {
		t.Fatalf("got stdout %q stderr %q exit %d", stdout, stderr, code)
	}
}

func TestExecute(t *testing.T) {
	c, base := newGRPC(t, Options{ExecTimeout: 2 * time.Second})
	ctx := testContext(t)
	if err := os.Mkdir(filepath.Join(base, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := c.Execute(ctx, &processpb.ExecuteRequest{Config: cfg("echo", "hi")})
	if err != nil || res.GetExitCode() != 0 || string(res.GetStdout()) != "hi\n" {
		t.Fatalf("echo hi: %v %v", res, err)
	}
	sub := "sub"
	res, err = c.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{
		Command: []string{"sh", "-c", `echo "$FOO"; pwd; echo oops >&2; exit 7`}, EnvVars: map[string]string{"FOO": "bar $HOME"}, Cwd: &sub}})
	real, _ := filepath.EvalSymlinks(filepath.Join(base, "sub"))
	if err != nil || res.GetExitCode() != 7 || string(res.GetStdout()) != "bar $HOME\n"+real+"\n" || string(res.GetStderr()) != "oops\n" {
		t.Fatalf("env and cwd: %v %v", res, err)
	}
	for _, tc := range []struct {
		name string
		cfg  *processpb.ProcessConfig
		want codes.Code
	}{
		{"empty command", cfg(), codes.InvalidArgument},
		{"missing program", cfg("no-such-program-here"), codes.NotFound},
		{"cwd outside the root", &processpb.ProcessConfig{Command: []string{"pwd"}, Cwd: ptr("../..")}, codes.PermissionDenied},
		{"cwd missing", &processpb.ProcessConfig{Command: []string{"pwd"}, Cwd: ptr("nope")}, codes.InvalidArgument},
		{"timeout", cfg("sleep", "30"), codes.DeadlineExceeded},
	} {
		_, err := c.Execute(ctx, &processpb.ExecuteRequest{Config: tc.cfg})
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

func ptr(s string) *string { return &s }

func TestWriteStdin(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx := testContext(t)
	s := start(t, ctx, c, &processpb.StartRequest{Config: cfg("cat")})
	write := func(p *processpb.WriteStdinRequest) error { _, err := c.WriteStdin(ctx, p); return err }
	if err := write(&processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("hello\n")}}); err != nil {
		t.Fatal(err)
	}
	s.until(t, regexp.MustCompile(`^hello\n$`))
	if err := write(&processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, code := s.rest(t); code != 0 {
		t.Fatalf("cat after eof exited %d, want 0", code)
	}
	err := write(&processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("late")}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("stdin of an exited process: %v, want NotFound", err)
	}
}

func TestSendSignalKills(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx := testContext(t)
	s := start(t, ctx, c, &processpb.StartRequest{Config: cfg("sleep", "60")})
	if _, err := c.SendSignal(ctx, &processpb.SendSignalRequest{ProcessId: s.pid}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("SIGNAL_UNSPECIFIED: %v, want InvalidArgument", err)
	}
	begin := time.Now()
	if _, err := c.SendSignal(ctx, &processpb.SendSignalRequest{ProcessId: s.pid, Signal: processpb.Signal_SIGNAL_SIGKILL}); err != nil {
		t.Fatal(err)
	}
	if _, _, code := s.rest(t); code != -9 {
		t.Fatalf("exit code %d, want -9 (killed by SIGKILL)", code)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Fatalf("the process took %s to die", d)
	}
}

func TestResizeTTYChangesSttySize(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx := testContext(t)
	s := start(t, ctx, c, &processpb.StartRequest{
		Config: cfg("sh", "-c", `stty size; read line; stty size`),
		Pty:    &processpb.PTY{Cols: 80, Rows: 24},
	})
	s.until(t, regexp.MustCompile(`24 80\r?\n`))
	if _, err := c.ResizeTTY(ctx, &processpb.ResizeTTYRequest{ProcessId: s.pid, Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Input{Input: []byte("\n")}}); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := s.rest(t)
	if !strings.Contains(stdout, "43 132") || code != 0 {
		t.Fatalf("after ResizeTTY, stty size printed %q (exit %d), want 43 132", stdout, code)
	}

	plain := start(t, ctx, c, &processpb.StartRequest{Config: cfg("sleep", "60")})
	if _, err := c.ResizeTTY(ctx, &processpb.ResizeTTYRequest{ProcessId: plain.pid, Cols: 10, Rows: 10}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ResizeTTY without a PTY: %v, want FailedPrecondition", err)
	}
	_, _ = c.SendSignal(ctx, &processpb.SendSignalRequest{ProcessId: plain.pid, Signal: processpb.Signal_SIGNAL_SIGKILL})
}

func TestPTYStdinEOF(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx := testContext(t)
	s := start(t, ctx, c, &processpb.StartRequest{Config: cfg("cat"), Pty: &processpb.PTY{Cols: 80, Rows: 24}})
	if _, err := c.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: s.pid, Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, code := s.rest(t); code != 0 {
		t.Fatalf("cat on a PTY after eof exited %d", code)
	}
}

func TestStreamEndKillsProcessGroup(t *testing.T) {
	c, _ := newGRPC(t, Options{})
	ctx, cancel := context.WithCancel(testContext(t))
	s := start(t, ctx, c, &processpb.StartRequest{Config: cfg("sleep", "60")})
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(int(s.pid), 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running after its stream was cancelled", s.pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestInterceptorsWrapEveryCall(t *testing.T) {
	deny := status.Error(codes.Unauthenticated, "no token")
	c, _ := newGRPC(t, Options{},
		grpc.ChainUnaryInterceptor(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) { return nil, deny }),
		grpc.ChainStreamInterceptor(func(any, grpc.ServerStream, *grpc.StreamServerInfo, grpc.StreamHandler) error { return deny }))
	ctx := testContext(t)
	if _, err := c.Execute(ctx, &processpb.ExecuteRequest{Config: cfg("echo", "hi")}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Execute: %v", err)
	}
	stream, err := c.Start(ctx, &processpb.StartRequest{Config: cfg("echo", "hi")})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Start: %v", err)
	}
}
