package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// Interactive is one interactive run of a program over sandboxd's
// ProcessService (Sandbox.ProcessService): its output relayed as it comes,
// its input sent as it is read, a terminal (PTY) when TTY is set, resized
// on each Resizes event. What a local terminal needs besides (raw mode,
// SIGWINCH) is the caller's.
type Interactive struct {
	Argv []string
	// TTY runs the program on a PTY of Size() (80x24 when ok is false).
	TTY bool
	// Stdin, when not nil, is sent to the program (WriteStdin), and its
	// end as the end of the program's input.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Size is the local terminal's size; nil or ok false: none.
	Size func() (cols, rows uint32, ok bool)
	// Resizes says the local terminal's size changed (a SIGWINCH, say).
	Resizes <-chan struct{}
	// Resized, when not nil, is told the outcome of each resize sent.
	Resized chan<- error
}

// Run starts the program and relays until it exits. It returns the
// program's exit code, 128+N for a program killed by signal N, as shells
// report it.
func (s *Interactive) Run(ctx context.Context, proc processpb.ProcessServiceClient) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: s.Argv}}
	if s.TTY {
		cols, rows, ok := s.size()
		if !ok {
			cols, rows = 80, 24
		}
		req.Pty = &processpb.PTY{Cols: cols, Rows: rows}
	}
	stream, err := proc.Start(ctx, req)
	if err != nil {
		return 0, err
	}
	first, err := stream.Recv()
	if err != nil {
		return 0, err
	}
	if first.GetInit() == nil {
		return 0, errors.New("the runtime did not start with an InitEvent")
	}
	pid := first.GetInit().GetProcessId()
	if s.Stdin != nil {
		go s.sendStdin(ctx, proc, pid)
	}
	if s.TTY && s.Resizes != nil {
		go s.relayResizes(ctx, proc, pid)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended without an exit status")
			}
			return 0, err
		}
		switch e := ev.GetEvent().(type) {
		case *processpb.StartResponse_Stdout:
			_, _ = s.Stdout.Write(e.Stdout)
		case *processpb.StartResponse_Stderr:
			_, _ = s.Stderr.Write(e.Stderr)
		case *processpb.StartResponse_Exit:
			code := int(e.Exit.GetExitCode())
			if code < 0 {
				code = 128 - code
			}
			return code, nil
		}
	}
}

func (s *Interactive) size() (uint32, uint32, bool) {
	if s.Size == nil {
		return 0, 0, false
	}
	return s.Size()
}

// relayResizes sends the terminal's size on each Resizes event.
func (s *Interactive) relayResizes(ctx context.Context, proc processpb.ProcessServiceClient, pid int32) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Resizes:
			if cols, rows, ok := s.size(); ok {
				_, err := proc.ResizeTTY(ctx, &processpb.ResizeTTYRequest{ProcessId: pid, Cols: cols, Rows: rows})
				if s.Resized != nil {
					s.Resized <- err
				}
			}
		}
	}
}

// sendStdin relays Stdin to the program, then its end.
func (s *Interactive) sendStdin(ctx context.Context, proc processpb.ProcessServiceClient, pid int32) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Stdin.Read(buf)
		if n > 0 {
			in := &processpb.WriteStdinRequest{ProcessId: pid, Payload: &processpb.WriteStdinRequest_Input{Input: append([]byte(nil), buf[:n]...)}}
			if _, werr := proc.WriteStdin(ctx, in); werr != nil {
				return
			}
		}
		if err != nil {
			_, _ = proc.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: pid, Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
			return
		}
	}
}
