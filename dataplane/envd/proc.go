package envd

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb"
)

// waitDelay is how long a finished (or killed) program's output may stay
// open, held by a process it left behind, before its end is sent anyway.
const waitDelay = 2 * time.Second

// chunkSize is the most output one data event carries.
const chunkSize = 32 << 10

// subscriberBuffer is how many events a stream may have waiting.
const subscriberBuffer = 64

// proc is a program started by Start, known by its pid until it ends. Its
// output goes to every subscribed stream (Start's own, and Connect's);
// with none, it is dropped.
type proc struct {
	pid uint32
	tag *string
	cfg *processpb.ProcessConfig
	cmd *exec.Cmd
	// stdin is the write end of its stdin pipe (nil without stdin), tty
	// the PTY's master (nil without a PTY).
	stdin io.WriteCloser
	tty   *os.File
	// inMu serialises writes to stdin or the terminal.
	inMu sync.Mutex

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// reaped is set once Wait returned: the pid may be reused from then
	// on, so no signal goes to it.
	reaped bool
	ended  bool
	closed chan struct{} // closed once the end event went to every subscriber
}

// subscriber is one stream's queue of events. A full queue blocks the
// program's output (back pressure) until the stream reads or goes away.
type subscriber struct {
	events chan *processpb.ProcessEvent
	gone   <-chan struct{}
}

// subscribe adds a stream whose context is ctx; it gets every event from
// now on, and its channel is closed after the end event. It reports false
// when the program already ended.
func (p *proc) subscribe(ctx context.Context) (*subscriber, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil, false
	}
	sub := &subscriber{events: make(chan *processpb.ProcessEvent, subscriberBuffer), gone: ctx.Done()}
	p.subs[sub] = struct{}{}
	return sub, true
}

// unsubscribe removes a stream that stops reading.
func (p *proc) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	delete(p.subs, sub)
	p.mu.Unlock()
}

// publish sends ev to every subscriber, waiting for each to take it or to
// go away.
func (p *proc) publish(ev *processpb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for sub := range p.subs {
		subs = append(subs, sub)
	}
	p.mu.Unlock()
	for _, sub := range subs {
		select {
		case sub.events <- ev:
		case <-sub.gone:
			p.unsubscribe(sub)
		}
	}
}

// finish publishes the end event and closes every subscriber's channel.
func (p *proc) finish(end *processpb.ProcessEvent_EndEvent) {
	p.publish(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: end}})
	p.mu.Lock()
	p.ended = true
	for sub := range p.subs {
		close(sub.events)
	}
	p.subs = nil
	p.mu.Unlock()
	close(p.closed)
}

// output is an io.Writer publishing what the program writes as data events.
type output struct {
	p    *proc
	kind int // 0 stdout, 1 stderr, 2 pty
}

func (o output) Write(b []byte) (int, error) {
	for off := 0; off < len(b); off += chunkSize {
		chunk := append([]byte(nil), b[off:min(off+chunkSize, len(b))]...)
		data := &processpb.ProcessEvent_DataEvent{}
		switch o.kind {
		case 0:
			data.Output = &processpb.ProcessEvent_DataEvent_Stdout{Stdout: chunk}
		case 1:
			data.Output = &processpb.ProcessEvent_DataEvent_Stderr{Stderr: chunk}
		default:
			data.Output = &processpb.ProcessEvent_DataEvent_Pty{Pty: chunk}
		}
		o.p.publish(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: data}})
	}
	return len(b), nil
}

// start starts the program: on a PTY of the requested size (in a session of
// its own), or with pipes (in a process group of its own) and, when asked,
// an open stdin.
func (p *proc) start(size *processpb.PTY_Size, stdin bool) error {
	p.cmd.WaitDelay = waitDelay
	if size != nil {
		ws := &pty.Winsize{Cols: uint16(min(size.GetCols(), 0xffff)), Rows: uint16(min(size.GetRows(), 0xffff))}
		if ws.Cols == 0 || ws.Rows == 0 {
			ws = &pty.Winsize{Cols: 80, Rows: 24}
		}
		tty, err := pty.StartWithSize(p.cmd, ws)
		if err != nil {
			return err
		}
		p.tty = tty
		return nil
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout = output{p: p}
	p.cmd.Stderr = output{p: p, kind: 1}
	if stdin {
		w, err := p.cmd.StdinPipe()
		if err != nil {
			return err
		}
		p.stdin = w
	}
	return p.cmd.Start()
}

// wait reads a PTY's output (pipes are read by exec), waits for the
// program, and returns its end event.
func (p *proc) wait() *processpb.ProcessEvent_EndEvent {
	readerDone := make(chan struct{})
	if p.tty != nil {
		go func() {
			defer close(readerDone)
			_, _ = io.Copy(output{p: p, kind: 2}, p.tty) // EIO once the terminal's holders are gone
		}()
	} else {
		close(readerDone)
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.reaped = true
	p.mu.Unlock()
	select {
	case <-readerDone:
	case <-time.After(waitDelay):
	}
	if p.tty != nil {
		_ = p.tty.Close()
	}
	end := &processpb.ProcessEvent_EndEvent{ExitCode: -1}
	if ps := p.cmd.ProcessState; ps != nil {
		end.ExitCode = int32(ps.ExitCode())
		end.Exited = ps.Exited()
		end.Status = ps.String()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		msg := err.Error()
		end.Error = &msg
	} else if err != nil && end.Status != "" {
		msg := end.Status
		end.Error = &msg
	}
	return end
}

// signal sends sig to the program's process group (its session, on a PTY);
// ESRCH once the program was reaped.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	reaped := p.reaped
	p.mu.Unlock()
	// (Between Wait's reaping and reaped being set there is a window of a
	// few instructions; a pid reused within it is not a practical concern.)
	if reaped {
		return syscall.ESRCH
	}
	err := syscall.Kill(-int(p.pid), sig)
	if errors.Is(err, syscall.ESRCH) {
		err = syscall.Kill(int(p.pid), sig)
	}
	return err
}
