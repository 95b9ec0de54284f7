package conformance

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// started is a Start stream read in the background.
type started struct {
	pid    int32
	mu     sync.Mutex
	events []string // "init", "stdout", "stderr", "exit" in arrival order
	stdout string
	stderr string
	exit   int32
	err    error
	done   chan struct{}
}

// start calls Start and reads its InitEvent; the rest of the stream is
// read in the background.
func start(ctx context.Context, t *testing.T, pc processpb.ProcessServiceClient, req *processpb.StartRequest) *started {
	t.Helper()
	stream, err := pc.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start %v: %v", req.GetConfig().GetCommand(), err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetInit() == nil {
		t.Fatalf("Start %v: first event %v, %v; want an InitEvent", req.GetConfig().GetCommand(), first, err)
	}
	s := &started{pid: first.GetInit().GetProcessId(), events: []string{"init"}, exit: -1000, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			ev, err := stream.Recv()
			s.mu.Lock()
			switch {
			case err != nil:
				s.err = err
			case ev.GetInit() != nil:
				s.events = append(s.events, "init")
			case ev.GetExit() != nil:
				s.events, s.exit = append(s.events, "exit"), ev.GetExit().GetExitCode()
			case ev.GetStderr() != nil:
				s.events, s.stderr = append(s.events, "stderr"), s.stderr+string(ev.GetStderr())
			default:
				s.events, s.stdout = append(s.events, "stdout"), s.stdout+string(ev.GetStdout())
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitExit waits for the stream's end; it must end with an ExitEvent.
func (s *started) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("process %d: no end of its Start stream after a minute", s.pid)
	}
	if s.exit == -1000 {
		t.Fatalf("process %d: Start stream ended without an ExitEvent: %v", s.pid, s.err)
	}
}

// waitOutput waits until stdout holds want.
func (s *started) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.mu.Lock()
		out := s.stdout
		s.mu.Unlock()
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: output %q, want %q", s.pid, out, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
