package client

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// processService is the real sandboxd ProcessService on a listener.
func processService(t *testing.T) processpb.ProcessServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := sandboxd.NewGRPCServer(sandboxd.Options{BaseDir: t.TempDir()})
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return processpb.NewProcessServiceClient(cc)
}

// syncBuffer is a bytes.Buffer safe to read while a run writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// exec -it: the program gets a terminal of the local size, input is relayed,
// a SIGWINCH becomes ResizeTTY, and the exit code comes back.
func TestInteractiveWithTTY(t *testing.T) {
	proc := processService(t)
	stdinR, stdinW := io.Pipe()
	defer func() { _ = stdinW.Close() }()
	var mu sync.Mutex
	cols, rows := uint32(100), uint32(30)
	resizes := make(chan struct{}, 1)
	resized := make(chan error, 1)
	out := &syncBuffer{}
	s := &Interactive{
		Argv: []string{"sh", "-c", `stty size; read a; stty size; read b; echo "got $b"; exit 3`},
		TTY:  true, Stdin: stdinR, Stdout: out, Stderr: io.Discard, Resizes: resizes, Resized: resized,
		Size: func() (uint32, uint32, bool) { mu.Lock(); defer mu.Unlock(); return cols, rows, true },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	var code int
	var err error
	go func() { code, err = s.Run(ctx, proc); close(done) }()
	waitForOutput(t, out, "30 100")
	mu.Lock()
	cols, rows = 120, 40
	mu.Unlock()
	resizes <- struct{}{}
	if err := <-resized; err != nil {
		t.Fatalf("ResizeTTY: %v", err)
	}
	_, _ = io.WriteString(stdinW, "\n")
	waitForOutput(t, out, "40 120")
	_, _ = io.WriteString(stdinW, "typed\n")
	<-done
	if err != nil || code != 3 || !strings.Contains(out.String(), "got typed") {
		t.Fatalf("session = %d, %v; output %q", code, err, out.String())
	}
}

// exec -i without -t: plain pipes, and the end of the local input is the
// end of the program's.
func TestInteractiveStdinEOF(t *testing.T) {
	proc := processService(t)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	s := &Interactive{Argv: []string{"sh", "-c", "cat; echo done >&2; kill -9 $$"}, Stdin: strings.NewReader("piped input"),
		Stdout: out, Stderr: errOut}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := s.Run(ctx, proc)
	if err != nil || code != 137 || out.String() != "piped input" || errOut.String() != "done\n" {
		t.Fatalf("session = %d, %v; stdout %q stderr %q; want 137 (SIGKILL) and the input echoed", code, err, out.String(), errOut.String())
	}
}

func waitForOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never appeared in %q", want, out.String())
		}
	}
}
