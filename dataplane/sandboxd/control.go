package sandboxd

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/creack/pty"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// eot is what ends input on a terminal (VEOF, ^D).
const eot = 0x04

// Execute runs a program to its end, without stdin, and answers with its
// exit code and output (each stream capped at Options.MaxOutputBytes; the
// rest is dropped). Options.ExecTimeout bounds it: when it passes, or the
// call is cancelled, the program's process group is killed and the call
// fails with DEADLINE_EXCEEDED or CANCELLED.
func (s *Service) Execute(ctx context.Context, req *processpb.ExecuteRequest) (*processpb.ExecuteResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ExecTimeout)
	defer cancel()
	cmd, err := s.command(ctx, req.GetConfig())
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := runtime.NewCappedBuffer(s.opts.MaxOutputBytes)
	stderr := runtime.NewCappedBuffer(s.opts.MaxOutputBytes)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, startError(err)
	}
	_ = cmd.Wait()
	if ctx.Err() != nil && !cmd.ProcessState.Exited() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, status.Errorf(codes.DeadlineExceeded, "execute: the program ran over %s; its process group was killed", s.opts.ExecTimeout)
		}
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	code := exitCode(cmd.ProcessState)
	s.opts.Logger.Info("execute", "program", cmd.Args[0], "args", len(cmd.Args)-1, "exit_code", code,
		"duration", time.Since(start).Round(time.Millisecond), "stdout_dropped", stdout.Dropped(), "stderr_dropped", stderr.Dropped())
	return &processpb.ExecuteResponse{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// WriteStdin sends input to a program started by Start, or ends its input
// (eof: its stdin pipe is closed; on a PTY, ^D is typed).
func (s *Service) WriteStdin(_ context.Context, req *processpb.WriteStdinRequest) (*processpb.WriteStdinResponse, error) {
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch payload := req.GetPayload().(type) {
	case *processpb.WriteStdinRequest_Input:
		_, err = p.stdin.Write(payload.Input)
	case *processpb.WriteStdinRequest_Eof:
		if p.tty != nil {
			_, err = p.tty.Write([]byte{eot})
		} else {
			err = p.stdin.Close()
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "payload: want input or eof")
	}
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "process %d: stdin: %s", req.GetProcessId(), errText(err))
	}
	return &processpb.WriteStdinResponse{}, nil
}

// SendSignal signals a program started by Start, and its process group.
func (s *Service) SendSignal(_ context.Context, req *processpb.SendSignalRequest) (*processpb.SendSignalResponse, error) {
	var sig syscall.Signal
	switch req.GetSignal() {
	case processpb.Signal_SIGNAL_SIGINT:
		sig = syscall.SIGINT
	case processpb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case processpb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, status.Errorf(codes.InvalidArgument, "signal %v: want SIGINT, SIGKILL or SIGTERM", req.GetSignal())
	}
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, status.Errorf(codes.Internal, "process %d: signal: %v", req.GetProcessId(), err)
	}
	return &processpb.SendSignalResponse{}, nil
}

// ResizeTTY sets the window size of a program started with a PTY (the
// program gets SIGWINCH).
func (s *Service) ResizeTTY(_ context.Context, req *processpb.ResizeTTYRequest) (*processpb.ResizeTTYResponse, error) {
	if req.GetCols() == 0 || req.GetRows() == 0 || req.GetCols() > 0xffff || req.GetRows() > 0xffff {
		return nil, status.Errorf(codes.InvalidArgument, "size %dx%d: want 1 to 65535 columns and rows", req.GetCols(), req.GetRows())
	}
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if p.tty == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "process %d: %v", req.GetProcessId(), errNoTTY)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(req.GetCols()), Rows: uint16(req.GetRows())}); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "process %d: resize: %s", req.GetProcessId(), errText(err))
	}
	return &processpb.ResizeTTYResponse{}, nil
}
