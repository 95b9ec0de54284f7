package envd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb"
)

// commands.run("echo ..."): start{pid} first, the output, end last with
// exit code 0; the command runs in the home directory (HOME too) with the
// request's environment.
func TestStartRunsBashCommand(t *testing.T) {
	e := newEnv(t)
	req := bash(`echo "hello $WHO"; pwd; echo "$HOME"; echo oops >&2`)
	req.Process.Envs = map[string]string{"WHO": "e2b"}
	r := e.run(t, req)
	if r.streamed != nil {
		t.Fatal(r.streamed)
	}
	if r.order[0] != "start" || r.order[len(r.order)-1] != "end" || r.pid == 0 {
		t.Fatalf("events %v (pid %d): want start first and end last", r.order, r.pid)
	}
	home, _ := filepath.EvalSymlinks(filepath.Join(e.base, "home/user"))
	if got, want := r.stdout.String(), "hello e2b\n"+home+"\n"+home+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if r.stderr.String() != "oops\n" {
		t.Errorf("stderr %q", r.stderr.String())
	}
	if r.end.GetExitCode() != 0 || !r.end.GetExited() || r.end.Error != nil || r.end.GetStatus() != "exit status 0" {
		t.Errorf("end %v", r.end)
	}
}

// A non-zero exit is reported with its code, the status and an error, as
// the SDK raises CommandExitError from them.
func TestStartNonZeroExit(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, bash("exit 3"))
	if r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != "exit status 3" || r.end.GetError() != "exit status 3" {
		t.Fatalf("end %v", r.end)
	}
}

// A working directory that leaves the base directory is refused, so is one
// through a symlink pointing out; one inside is used.
func TestStartCwdConfined(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(e.base, "out")); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"/out", "/out/", "/out/../out", "../../out"} {
		req := bash("pwd")
		req.Process.Cwd = &cwd
		st, err := e.proc.Start(context.Background(), connect.NewRequest(req))
		if err == nil {
			for st.Receive() {
				t.Errorf("cwd %q: got event %v", cwd, st.Msg())
			}
			err = st.Err()
		}
		if code(err) != connect.CodePermissionDenied {
			t.Errorf("cwd %q: %v, want permission_denied", cwd, err)
		}
	}
	// "/.." is the root, as the legacy protocol reads it.
	e.write(t, "work/x", "")
	cwd := "/../work"
	req := bash("pwd")
	req.Process.Cwd = &cwd
	r := e.run(t, req)
	real, _ := filepath.EvalSymlinks(filepath.Join(e.base, "work"))
	if r.stdout.String() != real+"\n" {
		t.Errorf("pwd %q, want %q", r.stdout.String(), real)
	}
}

// stdin: true keeps the input open: SendInput reaches the program and
// CloseStdin ends it.
func TestStdinSendAndClose(t *testing.T) {
	e := newEnv(t)
	req := bash("cat; echo done")
	req.Stdin = new(bool)
	*req.Stdin = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	if _, err := e.proc.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel,
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("typed\n")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.proc.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	r := collect(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
	if r.stdout.String() != "typed\ndone\n" || r.end.GetExitCode() != 0 {
		t.Fatalf("stdout %q, end %v", r.stdout.String(), r.end)
	}
	// Without stdin, the program reads end of file at once and SendInput
	// is refused.
	r = e.run(t, bash("cat; echo eof"))
	if r.stdout.String() != "eof\n" {
		t.Errorf("without stdin: stdout %q", r.stdout.String())
	}
}

// commands.kill(pid): SIGKILL ends the program (and its group): its end
// says so; an unknown pid is not_found (kill() then returns false).
func TestSendSignalKills(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := e.proc.Start(ctx, connect.NewRequest(bash("sleep 60 & sleep 60; echo never")))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	start := time.Now()
	if _, err := e.proc.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: processpb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	r := collect(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
	if r.end == nil || r.end.GetExited() || r.end.GetExitCode() != -1 || r.end.GetStatus() != "signal: killed" || strings.Contains(r.stdout.String(), "never") {
		t.Fatalf("end %v, stdout %q", r.end, r.stdout.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the end came %s after the kill: the group's background sleep kept it", d)
	}
	_, err = e.proc.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: processpb.Signal_SIGNAL_SIGKILL}))
	if code(err) != connect.CodeNotFound {
		t.Errorf("signal to an ended pid: %v, want not_found", err)
	}
	_, err = e.proc.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: 999999}}, Signal: processpb.Signal_SIGNAL_SIGTERM}))
	if code(err) != connect.CodeNotFound {
		t.Errorf("signal to an unknown pid: %v, want not_found", err)
	}
}

// A background command outlives the stream that started it: List shows it
// with its tag, Connect follows it again (output from then on, then its
// end), and it is gone from List once it ended.
func TestListConnectAndTags(t *testing.T) {
	e := newEnv(t)
	e.write(t, "home/user/go", "")
	req := bash(`while [ -e go ]; do sleep 0.05; done; echo finished; exit 4`)
	tag := "job-1"
	req.Tag = &tag
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Receive() {
		t.Fatal(first.Err())
	}
	pid := first.Msg().GetEvent().GetStart().GetPid()
	_ = first.Close() // the client goes away; the program goes on

	list, err := e.proc.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.Msg.GetProcesses()); n != 1 || list.Msg.GetProcesses()[0].GetPid() != pid ||
		list.Msg.GetProcesses()[0].GetTag() != tag || list.Msg.GetProcesses()[0].GetConfig().GetCmd() != "/bin/bash" {
		t.Fatalf("list %v", list.Msg)
	}
	again, err := e.proc.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: tag}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Receive() || again.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect: first event %v, %v", again.Msg(), again.Err())
	}
	if err := os.Remove(filepath.Join(e.base, "home/user/go")); err != nil {
		t.Fatal(err)
	}
	r := collect(t, again.Receive, func() *processpb.ProcessEvent { return again.Msg().GetEvent() }, again.Err)
	if r.stdout.String() != "finished\n" || r.end.GetExitCode() != 4 {
		t.Fatalf("connect: stdout %q, end %v", r.stdout.String(), r.end)
	}
	eventually(t, "the ended program to leave List", func() bool {
		list, err := e.proc.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
		return err == nil && len(list.Msg.GetProcesses()) == 0
	})
	_, err = e.proc.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}}))
	if err == nil {
		// A stream's error may come with its first Receive.
		st, _ := e.proc.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{
			Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}}))
		for st.Receive() {
		}
		err = st.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Errorf("connect to an ended program: %v, want not_found", err)
	}
}

// pty.create / resize / sendInput: the program runs on a terminal of the
// asked size, Update resizes it, input goes to the terminal, output comes
// as pty data.
func TestPTYResizeAndInput(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := &processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"--noprofile", "--norc", "-i"}, Envs: map[string]string{"PS1": "$ "}},
		Pty:     &processpb.PTY{Size: &processpb.PTY_Size{Cols: 90, Rows: 30}},
	}
	st, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	input := func(s string) {
		t.Helper()
		if _, err := e.proc.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel,
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte(s)}}})); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	waitFor := func(want string) {
		t.Helper()
		for !strings.Contains(out.String(), want) {
			if !st.Receive() {
				t.Fatalf("stream ended before %q in %q: %v", want, out.String(), st.Err())
			}
			out.Write(st.Msg().GetEvent().GetData().GetPty())
			if st.Msg().GetEvent().GetData().GetStdout() != nil {
				t.Fatal("a PTY's output came as stdout")
			}
		}
	}
	input("stty size; echo marker-$((6*7))\n")
	waitFor("marker-42")
	if !strings.Contains(out.String(), "30 90") {
		t.Errorf("size before resize: %q, want 30 90", out.String())
	}
	if _, err := e.proc.Update(ctx, connect.NewRequest(&processpb.UpdateRequest{Process: sel,
		Pty: &processpb.PTY{Size: &processpb.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	// The new size is asked for until a command sees it: bash may still be
	// handling the SIGWINCH the resize sent when the first one runs (seen
	// once on a loaded machine), but it must see it within a few tries.
	resized := false
	for try := 1; try <= 5 && !resized; try++ {
		out.Reset()
		input(fmt.Sprintf("stty size; echo again-$((%d*7))\n", try))
		waitFor(fmt.Sprintf("again-%d", try*7))
		resized = strings.Contains(out.String(), "40 120")
		if !resized {
			t.Logf("try %d, size after resize: %q", try, out.String())
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !resized {
		t.Errorf("size after resize: %q, want 40 120", out.String())
	}
	input("exit 5\n")
	r := collect(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
	if r.end.GetExitCode() != 5 {
		t.Errorf("end %v", r.end)
	}
	// Update on a program without a terminal is refused.
	bg, err := e.proc.Start(ctx, connect.NewRequest(bash("sleep 30")))
	if err != nil || !bg.Receive() {
		t.Fatal(err, bg.Err())
	}
	_, err = e.proc.Update(ctx, connect.NewRequest(&processpb.UpdateRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: bg.Msg().GetEvent().GetStart().GetPid()}},
		Pty:     &processpb.PTY{Size: &processpb.PTY_Size{Cols: 1, Rows: 1}}}))
	if code(err) != connect.CodeFailedPrecondition {
		t.Errorf("update without a pty: %v", err)
	}
}

// Keepalives come while a program is quiet, at the client's interval.
func TestKeepalive(t *testing.T) {
	e := newEnv(t)
	req := connect.NewRequest(bash("sleep 2.5; echo late"))
	req.Header().Set(keepaliveHeader, "1")
	st, err := e.proc.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
	if !slices.Contains(r.order, "keepalive") || r.stdout.String() != "late\n" {
		t.Fatalf("events %v, stdout %q", r.order, r.stdout.String())
	}
}

// Close kills the programs still running, background ones included.
func TestCloseKillsPrograms(t *testing.T) {
	e := newEnv(t)
	st, err := e.proc.Start(context.Background(), connect.NewRequest(bash("sleep 60")))
	if err != nil || !st.Receive() {
		t.Fatal(err, st.Err())
	}
	pid := int(st.Msg().GetEvent().GetStart().GetPid())
	_ = st.Close()
	e.srv.Close()
	eventually(t, "the program to die", func() bool {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err != nil || strings.Contains(string(data), ") Z ")
	})
}

// Large output arrives whole, in order, before the end event, in chunks
// of at most chunkSize.
func TestStartLargeOutput(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := e.proc.Start(ctx, connect.NewRequest(bash(`seq 1 200000`)))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var ended bool
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if d := ev.GetData().GetStdout(); d != nil {
			if ended {
				t.Fatal("output after the end event")
			}
			if len(d) > chunkSize {
				t.Fatalf("a chunk of %d bytes", len(d))
			}
			out.Write(d)
		}
		if ev.GetEnd() != nil {
			ended = true
		}
	}
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	if !ended || out.String() != want.String() {
		t.Fatalf("ended %v, %d bytes, want %d", ended, out.Len(), want.Len())
	}
}
