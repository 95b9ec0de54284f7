package sandboxd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentsandbox/reconciler/dataplane/runtime"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// waitDelay is how long a finished (or killed) program's output may stay
// open, held by a process it left behind, before its stream ends anyway.
const waitDelay = 2 * time.Second

// chunkSize is the most output one StartResponse carries.
const chunkSize = 32 << 10

// Service is sandboxd's process.v1.ProcessService: it runs programs in the
// sandbox, without a shell, each in a process group of its own.
type Service struct {
	processpb.UnimplementedProcessServiceServer
	opts Options

	mu    sync.Mutex
	procs map[int32]*process
}

// NewService returns the ProcessService implementation.
func NewService(opts Options) *Service {
	return &Service{opts: opts.withDefaults(), procs: map[int32]*process{}}
}

// NewGRPCServer returns a gRPC server (served on port 9090) with the
// ProcessService registered. serverOpts are passed to grpc.NewServer:
// interceptors (grpc.ChainUnaryInterceptor, grpc.ChainStreamInterceptor)
// wrap every call, e.g. for authentication.
func NewGRPCServer(opts Options, serverOpts ...grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(serverOpts...)
	processpb.RegisterProcessServiceServer(s, NewService(opts))
	return s
}

// process is a program started by Start, known by its pid until it exits.
type process struct {
	cmd *exec.Cmd
	// stdin is the write end of its stdin pipe, or the PTY's master.
	stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	tty *os.File // the PTY's master, nil without one
	mu  sync.Mutex
}

// command builds the exec.Cmd for cfg: the program found on PATH, the
// working directory confined to the base directory, the runtime's
// environment plus cfg's variables.
func (s *Service) command(ctx context.Context, cfg *processpb.ProcessConfig) (*exec.Cmd, error) {
	argv := cfg.GetCommand()
	if len(argv) == 0 || argv[0] == "" {
		return nil, status.Error(codes.InvalidArgument, "config.command: want the program and its arguments")
	}
	dir := s.opts.BaseDir
	if cfg.Cwd != nil {
		d, err := runtime.Resolve(s.opts.BaseDir, cfg.GetCwd())
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(d); err == nil && !st.IsDir() {
				err = syscall.ENOTDIR
			}
		}
		switch {
		case errors.Is(err, runtime.ErrAccessDenied):
			return nil, status.Errorf(codes.PermissionDenied, "config.cwd %q: the path leaves the sandbox's root", cfg.GetCwd())
		case err != nil:
			return nil, status.Errorf(codes.InvalidArgument, "config.cwd %q: %s", cfg.GetCwd(), errText(err))
		}
		dir = d
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if len(cfg.GetEnvVars()) > 0 {
		keys := make([]string, 0, len(cfg.GetEnvVars()))
		for k := range cfg.GetEnvVars() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		cmd.Env = os.Environ()
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+cfg.GetEnvVars()[k])
		}
	}
	// The group (made by Setpgid, or by the PTY's Setsid) dies with it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd, nil
}

// startError is the status of a program that could not be started.
func startError(err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return status.Errorf(codes.NotFound, "start: %s", errText(err))
	}
	if errors.Is(err, os.ErrPermission) {
		return status.Errorf(codes.PermissionDenied, "start: %s", errText(err))
	}
	return status.Errorf(codes.FailedPrecondition, "start: %s", errText(err))
}

// exitCode is the program's exit status, or minus the signal that killed
// it (as the legacy protocol reports it).
func exitCode(ps *os.ProcessState) int32 {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			return -int32(ws.Signal())
		}
		return int32(ws.ExitStatus())
	}
	return 1
}

// streamWriter sends what a program writes as Start events, one chunk at
// a time, until ctx ends.
type streamWriter struct {
	ctx    context.Context
	events chan<- *processpb.StartResponse
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += chunkSize {
		chunk := append([]byte(nil), p[off:min(off+chunkSize, len(p))]...)
		ev := &processpb.StartResponse{Event: &processpb.StartResponse_Stdout{Stdout: chunk}}
		if w.stderr {
			ev = &processpb.StartResponse{Event: &processpb.StartResponse_Stderr{Stderr: chunk}}
		}
		select {
		case w.events <- ev:
		case <-w.ctx.Done():
			return off, w.ctx.Err()
		}
	}
	return len(p), nil
}

// Start runs a program and streams, in this order, one InitEvent with its
// pid, its output as it comes, and one ExitEvent. With a PTY, the program
// runs in a new session on the terminal (its output arrives as stdout).
// When the stream ends first (the client went away), the program's process
// group is killed.
func (s *Service) Start(req *processpb.StartRequest, stream grpc.ServerStreamingServer[processpb.StartResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	cmd, err := s.command(ctx, req.GetConfig())
	if err != nil {
		return err
	}
	events := make(chan *processpb.StartResponse, 16)
	p := &process{cmd: cmd}
	readerDone := make(chan struct{})
	if req.Pty != nil {
		size := &pty.Winsize{Cols: uint16(min(req.GetPty().GetCols(), 0xffff)), Rows: uint16(min(req.GetPty().GetRows(), 0xffff))}
		if size.Cols == 0 || size.Rows == 0 {
			size = &pty.Winsize{Cols: 80, Rows: 24}
		}
		tty, err := pty.StartWithSize(cmd, size)
		if err != nil {
			return startError(err)
		}
		p.tty, p.stdin = tty, tty
		go func() {
			defer close(readerDone)
			buf := make([]byte, chunkSize)
			out := streamWriter{ctx: ctx, events: events}
			for {
				n, err := tty.Read(buf)
				if n > 0 {
					if _, werr := out.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil { // EIO once every holder of the terminal is gone
					return
				}
			}
		}()
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stdout = streamWriter{ctx: ctx, events: events}
		cmd.Stderr = streamWriter{ctx: ctx, events: events, stderr: true}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return startError(err)
		}
		p.stdin = stdin
		if err := cmd.Start(); err != nil {
			return startError(err)
		}
		close(readerDone)
	}
	pid := int32(cmd.Process.Pid)
	s.mu.Lock()
	s.procs[pid] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.procs, pid)
		s.mu.Unlock()
		if p.tty != nil {
			_ = p.tty.Close()
		}
	}()
	s.opts.Logger.Info("start", "program", cmd.Args[0], "args", len(cmd.Args)-1, "pid", pid, "pty", p.tty != nil)

	// exited is closed once the program is waited for; waitErr is then
	// what Wait returned.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		err := cmd.Wait()
		// A PTY's output is read here, not by exec: give the reader the
		// wait delay to drain what the program wrote before it exited.
		select {
		case <-readerDone:
		case <-time.After(waitDelay):
		}
		waitErr = err
		close(exited)
	}()
	if err := stream.Send(&processpb.StartResponse{Event: &processpb.StartResponse_Init{Init: &processpb.InitEvent{ProcessId: pid}}}); err != nil {
		cancel()
		<-exited
		return err
	}
	for {
		select {
		case ev := <-events:
			if err := stream.Send(ev); err != nil {
				cancel()
				<-exited
				return err
			}
		case <-exited:
			for drained := false; !drained; {
				select {
				case ev := <-events:
					if err := stream.Send(ev); err != nil {
						return err
					}
				default:
					drained = true
				}
			}
			if cmd.ProcessState == nil {
				return status.Errorf(codes.Internal, "wait: %v", waitErr)
			}
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			code := exitCode(cmd.ProcessState)
			s.opts.Logger.Info("exit", "pid", pid, "exit_code", code)
			return stream.Send(&processpb.StartResponse{Event: &processpb.StartResponse_Exit{Exit: &processpb.ExitEvent{ExitCode: code}}})
		}
	}
}

// lookup finds a running program started by Start.
func (s *Service) lookup(id int32) (*process, error) {
	s.mu.Lock()
	p := s.procs[id]
	s.mu.Unlock()
	if p == nil {
		return nil, status.Errorf(codes.NotFound, "process %d: no such process started by Start (or it has exited)", id)
	}
	return p, nil
}

// errNoTTY is ResizeTTY on a program started without a PTY.
var errNoTTY = errors.New("the process has no PTY (start it with pty set)")
