package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb/processpbconnect"
	"github.com/agentsandbox/reconciler/dataplane/runtime"
)

// keepaliveHeader is the client's wish for keepalive events while a stream
// is quiet, in seconds.
const keepaliveHeader = "Keepalive-Ping-Interval"

// processService is process.Process.
type processService struct {
	processpbconnect.UnimplementedProcessHandler
	opts Options

	mu    sync.Mutex
	procs map[uint32]*proc
}

func newProcessService(opts Options) *processService {
	return &processService{opts: opts, procs: map[uint32]*proc{}}
}

// command builds the program's exec.Cmd: cmd with args as given, in the
// home directory or the working directory asked for (relative to home),
// confined to the base directory, with the runtime's environment, HOME and
// the request's variables.
func (s *processService) command(cfg *processpb.ProcessConfig) (*exec.Cmd, error) {
	if cfg.GetCmd() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd: want the program to run"))
	}
	home, err := resolve(s.opts.BaseDir, s.opts.HomeDir)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(home); err == nil && !st.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	if err != nil { // no home (removed, or made a file): the root
		if home, err = resolve(s.opts.BaseDir, "/"); err != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("base directory: %w", err))
		}
	}
	dir := home
	if cfg.GetCwd() != "" {
		dir, err = resolve(s.opts.BaseDir, s.opts.abs(cfg.GetCwd()))
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(dir); err == nil && !st.IsDir() {
				err = syscall.ENOTDIR
			}
		}
	}
	if err != nil {
		if errors.Is(err, runtime.ErrAccessDenied) {
			return nil, pathError("cwd", cfg.GetCwd(), err)
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %s: %s", quote(cfg.GetCwd()), errText(err)))
	}
	cmd := exec.Command(cfg.GetCmd(), cfg.GetArgs()...)
	cmd.Dir = dir
	// The runtime's environment, HOME the home directory, then the
	// request's variables (which win).
	keys := make([]string, 0, len(cfg.GetEnvs()))
	for k := range cfg.GetEnvs() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cmd.Env = append(os.Environ(), "HOME="+home)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+cfg.GetEnvs()[k])
	}
	return cmd, nil
}

// startError is the Connect error of a program that could not start.
func startError(cmd string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("start %s: %s", quote(cmd), errText(err)))
	case errors.Is(err, os.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("start %s: %s", quote(cmd), errText(err)))
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("start %s: %s", quote(cmd), errText(err)))
}

// Start runs a program and streams start{pid}, its output, keepalives and
// end{...}. The program does not end with the stream.
func (s *processService) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	cmd, err := s.command(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	p := &proc{cfg: req.Msg.GetProcess(), tag: req.Msg.Tag, cmd: cmd, subs: map[*subscriber]struct{}{}, closed: make(chan struct{})}
	sub, _ := p.subscribe(ctx)
	var size *processpb.PTY_Size
	if req.Msg.Pty != nil {
		size = req.Msg.GetPty().GetSize()
		if size == nil {
			size = &processpb.PTY_Size{}
		}
	}
	if err := p.start(size, req.Msg.GetStdin()); err != nil {
		return startError(cmd.Path, err)
	}
	p.pid = uint32(cmd.Process.Pid)
	s.mu.Lock()
	s.procs[p.pid] = p
	s.mu.Unlock()
	s.opts.Logger.Info("envd start", "program", cmd.Path, "args", len(cmd.Args)-1, "pid", p.pid, "pty", p.tty != nil)
	go func() {
		end := p.wait()
		s.mu.Lock()
		delete(s.procs, p.pid)
		s.mu.Unlock()
		s.opts.Logger.Info("envd end", "pid", p.pid, "exit_code", end.GetExitCode(), "status", end.GetStatus())
		p.finish(end)
	}()
	return follow(ctx, req.Header(), p, sub, func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.StartResponse{Event: ev})
	})
}

// Connect follows a running program: start{pid}, then its output from now
// on and its end.
func (s *processService) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub, ok := p.subscribe(ctx)
	if !ok {
		return notFound(req.Msg.GetProcess())
	}
	return follow(ctx, req.Header(), p, sub, func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.ConnectResponse{Event: ev})
	})
}

// follow sends start{pid}, then sub's events until the end event, with a
// keepalive whenever the client's interval passes without an event.
func follow(ctx context.Context, h http.Header, p *proc, sub *subscriber, send func(*processpb.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
		return err
	}
	var tick <-chan time.Time
	if d := keepaliveInterval(h); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, open := <-sub.events:
			if !open {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
		case <-tick:
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctxError(ctx)
		}
	}
}

// keepaliveInterval is the Keepalive-Ping-Interval header's, bounded to a
// second and an hour; none without the header.
func keepaliveInterval(h http.Header) time.Duration {
	n, err := strconv.ParseFloat(h.Get(keepaliveHeader), 64)
	if err != nil || n <= 0 {
		return 0
	}
	return min(max(time.Duration(n*float64(time.Second)), time.Second), time.Hour)
}

// List answers the running programs, by pid.
func (s *processService) List(context.Context, *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	s.mu.Lock()
	out := make([]*processpb.ProcessInfo, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, &processpb.ProcessInfo{Config: p.cfg, Pid: p.pid, Tag: p.tag})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return connect.NewResponse(&processpb.ListResponse{Processes: out}), nil
}

// lookup finds a running program by pid or tag.
func (s *processService) lookup(sel *processpb.ProcessSelector) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		if p := s.procs[v.Pid]; p != nil {
			return p, nil
		}
	case *processpb.ProcessSelector_Tag:
		var found *proc
		for _, p := range s.procs {
			if p.tag != nil && *p.tag == v.Tag && (found == nil || p.pid < found.pid) {
				found = p
			}
		}
		if found != nil {
			return found, nil
		}
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process: want a pid or a tag"))
	}
	return nil, notFound(sel)
}

func notFound(sel *processpb.ProcessSelector) error {
	if t, ok := sel.GetSelector().(*processpb.ProcessSelector_Tag); ok {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found (not started by Start, or it has ended)", quote(t.Tag)))
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found (not started by Start, or it has ended)", sel.GetPid()))
}

// SendSignal sends SIGTERM or SIGKILL to a program's process group.
func (s *processService) SendSignal(_ context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case processpb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case processpb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %s: want SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.GetSignal()))
	}
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.signal(sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil, notFound(req.Msg.GetProcess())
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal process %d: %w", p.pid, err))
	}
	s.opts.Logger.Info("envd signal", "pid", p.pid, "signal", sig.String())
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

// SendInput writes to a program's stdin (started with stdin) or terminal.
func (s *processService) SendInput(_ context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var data []byte
	var dst interface{ Write([]byte) (int, error) }
	switch in := req.Msg.GetInput().GetInput().(type) {
	case *processpb.ProcessInput_Stdin:
		if p.stdin == nil {
			if p.tty == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin (start it with stdin: true)", p.pid))
			}
			dst = p.tty // a terminal's input is its stdin
		} else {
			dst = p.stdin
		}
		data = in.Stdin
	case *processpb.ProcessInput_Pty:
		if p.tty == nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no PTY (start it with pty)", p.pid))
		}
		dst, data = p.tty, in.Pty
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input: want stdin or pty bytes"))
	}
	p.inMu.Lock()
	_, err = dst.Write(data)
	p.inMu.Unlock()
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("write to process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// CloseStdin ends a program's input (it reads end of file).
func (s *processService) CloseStdin(_ context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no stdin to close (started without stdin, or on a PTY: send ctrl-D)", p.pid))
	}
	p.inMu.Lock()
	err = p.stdin.Close()
	p.inMu.Unlock()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("close stdin of process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

// Update resizes a program's terminal.
func (s *processService) Update(_ context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	p, err := s.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty == nil {
		return connect.NewResponse(&processpb.UpdateResponse{}), nil
	}
	if p.tty == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no PTY (start it with pty)", p.pid))
	}
	size := req.Msg.GetPty().GetSize()
	if size.GetCols() == 0 || size.GetRows() == 0 || size.GetCols() > 0xffff || size.GetRows() > 0xffff {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("pty.size: want cols and rows between 1 and 65535"))
	}
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("resize the terminal of process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

// closeAll kills every running program's process group and waits, at most
// twice the wait delay, for their ends to be published.
func (s *processService) closeAll() {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	deadline := time.After(2*waitDelay + time.Second)
	for _, p := range procs {
		_ = p.signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.closed:
		case <-deadline:
			return
		}
	}
}

// ctxError is the error of a stream whose context ended: deadline_exceeded
// when the client's Connect-Timeout-Ms passed (the SDK's timeoutMs),
// canceled when it went away.
func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
	}
	return connect.NewError(connect.CodeCanceled, ctx.Err())
}
