package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// session is one interactive exec (-i, -t) over sandboxd's ProcessService.
type session struct {
	proc processpb.ProcessServiceClient
	argv []string
	// tty runs the program on a PTY of size() (the local terminal's).
	tty bool
	// stdin, when not nil, is sent to the program (WriteStdin), and its end
	// as eof.
	stdin          io.Reader
	stdout, stderr io.Writer
	// size is the local terminal's size; ok false when there is none.
	size func() (cols, rows uint32, ok bool)
	// winch delivers the local terminal's size changes (SIGWINCH).
	winch <-chan os.Signal
	// resized, when not nil, is told each time a resize was sent.
	resized chan<- error
}

// run starts the program and relays until it exits; it returns the
// program's exit code, 128+N for a program killed by signal N, as shells
// report it.
func (s *session) run(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: s.argv}}
	if s.tty {
		cols, rows, ok := s.size()
		if !ok {
			cols, rows = 80, 24
		}
		req.Pty = &processpb.PTY{Cols: cols, Rows: rows}
	}
	stream, err := s.proc.Start(ctx, req)
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
	if s.stdin != nil {
		go s.sendStdin(ctx, pid)
	}
	if s.tty && s.winch != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.winch:
					if cols, rows, ok := s.size(); ok {
						_, err := s.proc.ResizeTTY(ctx, &processpb.ResizeTTYRequest{ProcessId: pid, Cols: cols, Rows: rows})
						if s.resized != nil {
							s.resized <- err
						}
					}
				}
			}
		}()
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
			_, _ = s.stdout.Write(e.Stdout)
		case *processpb.StartResponse_Stderr:
			_, _ = s.stderr.Write(e.Stderr)
		case *processpb.StartResponse_Exit:
			code := int(e.Exit.GetExitCode())
			if code < 0 {
				code = 128 - code
			}
			return code, nil
		}
	}
}

// sendStdin relays stdin to the program, then its end.
func (s *session) sendStdin(ctx context.Context, pid int32) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.stdin.Read(buf)
		if n > 0 {
			in := &processpb.WriteStdinRequest{ProcessId: pid, Payload: &processpb.WriteStdinRequest_Input{Input: append([]byte(nil), buf[:n]...)}}
			if _, werr := s.proc.WriteStdin(ctx, in); werr != nil {
				return
			}
		}
		if err != nil {
			_, _ = s.proc.WriteStdin(ctx, &processpb.WriteStdinRequest{ProcessId: pid, Payload: &processpb.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
			return
		}
	}
}

// runInteractive is exec -i/-t: the program runs through sandboxd's Start
// (with a PTY for -t) and this terminal is put in raw mode for it, so that
// keys, Ctrl-C included, reach the program and not this process.
func runInteractive(ctx context.Context, proc processpb.ProcessServiceClient, argv []string, interactive, tty bool, stdout, stderr io.Writer) (int, error) {
	s := &session{proc: proc, argv: argv, tty: tty, stdout: stdout, stderr: stderr, size: func() (uint32, uint32, bool) { return 0, 0, false }}
	if interactive {
		s.stdin = os.Stdin
	}
	fd := int(os.Stdin.Fd())
	if tty && term.IsTerminal(fd) {
		s.size = func() (uint32, uint32, bool) {
			w, h, err := term.GetSize(fd)
			return uint32(max(w, 0)), uint32(max(h, 0)), err == nil && w > 0 && h > 0
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		s.winch = winch
		if interactive {
			old, err := term.MakeRaw(fd)
			if err != nil {
				return 0, fmt.Errorf("raw terminal: %w", err)
			}
			defer func() { _ = term.Restore(fd, old) }()
		}
	}
	return s.run(ctx)
}
