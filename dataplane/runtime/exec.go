package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentsandbox/reconciler/dataplane/webguard"
)

// waitDelay is how long a finished (or killed) command's output pipes may
// stay open, held by a process it left behind, before they are closed and the
// result returned anyway.
const waitDelay = 2 * time.Second

// ExecuteRequest is the body of POST /execute.
type ExecuteRequest struct {
	Command string `json:"command"`
}

// ExecuteResponse is the answer to POST /execute.
type ExecuteResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// execute runs one command without a shell. Like upstream, a command that
// cannot be split or started, or that times out, is still a 200 with
// exit_code 1 and the reason in stderr; only a request that is not
// {"command": string} is refused (FastAPI's 422).
func (h *handler) execute(w http.ResponseWriter, r *http.Request) {
	if !webguard.JSON(r) {
		// FastAPI's answer (upstream's runtime) to a body not sent as
		// JSON; refusing it keeps pages of other sites, which can POST
		// text/plain, forms and multipart without asking, out.
		writeJSON(w, http.StatusUnprocessableEntity, fieldError([]string{"body"}, "model_attributes_type",
			"Input should be a valid dictionary or object to extract fields from: send {\"command\": ...} with Content-Type: application/json"))
		return
	}
	var req struct {
		Command *string `json:"command"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, message("Request body too large: the limit is %d bytes", tooBig.Limit))
			return
		}
		writeJSON(w, http.StatusUnprocessableEntity, fieldError([]string{"body"}, "json_invalid", "JSON decode error: "+err.Error()))
		return
	}
	if req.Command == nil {
		writeJSON(w, http.StatusUnprocessableEntity, fieldError([]string{"body", "command"}, "missing", "Field required"))
		return
	}
	// The response is written when the command ends: make sure the
	// server's write timeout does not cut it off first.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.ExecTimeout + 2*waitDelay + 30*time.Second))
	writeJSON(w, http.StatusOK, h.run(r.Context(), *req.Command))
}

// run runs command in the base directory, killing its process group when
// the timeout passes or ctx ends.
func (h *handler) run(ctx context.Context, command string) ExecuteResponse {
	start := time.Now()
	argv, err := Split(command)
	if err == nil && len(argv) == 0 {
		err = errors.New("empty command")
	}
	if err != nil {
		return failed("", "", err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.ExecTimeout)
	defer cancel()

	stdout := &CappedBuffer{limit: h.opts.MaxOutputBytes}
	stderr := &CappedBuffer{limit: h.opts.MaxOutputBytes}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = h.opts.BaseDir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that a timeout kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay

	err = cmd.Run()
	out, errOut := stdout.String(), stderr.String()
	errOut = addLine(errOut, stdout.note("stdout"))
	errOut = addLine(errOut, stderr.note("stderr"))
	if errors.Is(err, exec.ErrWaitDelay) {
		errOut = addLine(errOut, "[output cut short: a process the command left running held its stdout or stderr open]")
	}
	res := ExecuteResponse{Stdout: out, Stderr: errOut}
	// A command that exited by itself reports its own status, even when
	// the deadline passed while its output was still being collected.
	killed := cmd.ProcessState != nil && !cmd.ProcessState.Exited()
	timedOut := killed && errors.Is(ctx.Err(), context.DeadlineExceeded)
	switch {
	case cmd.ProcessState == nil: // never started
		res = failed(out, errOut, err.Error())
	case timedOut:
		res = failed(out, errOut, fmt.Sprintf("Command timed out after %s; its process group was killed", h.opts.ExecTimeout))
	case killed && ctx.Err() != nil:
		res = failed(out, errOut, "Command cancelled: the request ended; its process group was killed")
	default:
		res.ExitCode = exitCode(cmd.ProcessState)
	}
	h.opts.Logger.Info("execute", "program", argv[0], "args", len(argv)-1, "exit_code", res.ExitCode,
		"timed_out", timedOut, "duration", time.Since(start).Round(time.Millisecond),
		"stdout_dropped", stdout.dropped, "stderr_dropped", stderr.dropped)
	return res
}

// failed is upstream's answer for a command that could not run to the end:
// exit_code 1 and "Failed to execute command: ..." in stderr, after whatever
// the command had written.
func failed(stdout, stderr, reason string) ExecuteResponse {
	return ExecuteResponse{Stdout: stdout, Stderr: addLine(stderr, "Failed to execute command: "+reason), ExitCode: 1}
}

// addLine appends line to s on a line of its own (nothing when line is empty).
func addLine(s, line string) string {
	if line == "" {
		return s
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s + line
}

// exitCode is the exit status as Python's subprocess reports it: the code,
// or minus the signal that killed the process.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			return -int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	return 1
}

// CappedBuffer keeps the first limit bytes written to it and counts the rest,
// always accepting writes so the command never blocks on a full pipe.
type CappedBuffer struct {
	buf     bytes.Buffer
	limit   int64
	dropped int64
}

// NewCappedBuffer returns a CappedBuffer that keeps limit bytes (sandboxd's
// Execute caps its output as /execute does).
func NewCappedBuffer(limit int64) *CappedBuffer { return &CappedBuffer{limit: limit} }

// Bytes is what was kept.
func (b *CappedBuffer) Bytes() []byte { return b.buf.Bytes() }

// Dropped is how many bytes were written past the limit.
func (b *CappedBuffer) Dropped() int64 { return b.dropped }

func (b *CappedBuffer) Write(p []byte) (int, error) {
	room := b.limit - int64(b.buf.Len())
	if room >= int64(len(p)) {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p)) - max(room, 0)
	return len(p), nil
}

// String is what was kept, cut back to a whole UTF-8 character when the
// limit split one.
func (b *CappedBuffer) String() string {
	data := b.buf.Bytes()
	if b.dropped == 0 {
		return string(data)
	}
	for cut := 0; cut < utf8.UTFMax-1 && len(data) > 0; cut++ {
		if r, size := utf8.DecodeLastRune(data); r != utf8.RuneError || size != 1 {
			break
		}
		data = data[:len(data)-1]
	}
	return string(data)
}

// note is a line for stderr saying how much of the stream was dropped, or
// nothing.
func (b *CappedBuffer) note(name string) string {
	if b.dropped == 0 {
		return ""
	}
	return fmt.Sprintf("[%s truncated: the first %d bytes kept, %d bytes dropped]", name, len(b.String()), b.dropped+int64(b.buf.Len()-len(b.String())))
}
