package docs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Session runs the blocks of one page: each in its own bash, in Dir, with
// Env, after Replace. Background processes live until Close.
type Session struct {
	Dir     string
	Env     []string
	Replace *strings.Replacer // documented addresses -> actual ones; nil: none
	groups  []int
	outDir  string
}

// Result is what a run block did.
type Result struct {
	Script string // the text that ran, after replacement
	Output string // stdout and stderr, interleaved
	Took   time.Duration
}

// Run runs b and fails when bash exits non-zero, the timeout passes or the
// output lacks an expected string. The error carries the script and its
// output.
func (s *Session) Run(ctx context.Context, b Block) (Result, error) {
	if !b.Run {
		return Result{}, fmt.Errorf("%s is not a run block", b.Where())
	}
	script := b.Text
	if s.Replace != nil {
		script = s.Replace.Replace(script)
	}
	res := Result{Script: script}
	if s.outDir == "" {
		d, err := os.MkdirTemp("", "docs-output-")
		if err != nil {
			return res, fmt.Errorf("making an output directory: %w", err)
		}
		s.outDir = d
	}
	// Output goes to a file, not a pipe: a background process a block
	// starts keeps its stdout open, and the block is over when bash exits.
	outPath := filepath.Join(s.outDir, fmt.Sprintf("block-%d.out", len(s.groups)))
	out, err := os.Create(outPath)
	if err != nil {
		return res, fmt.Errorf("creating %s: %w", outPath, err)
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command("bash", "-eo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("%s: starting bash: %w", b.Where(), err)
	}
	s.groups = append(s.groups, cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var runErr error
	select {
	case runErr = <-done:
		var exit *exec.ExitError
		if errors.As(runErr, &exit) {
			runErr = fmt.Errorf("exit code %d", exit.ExitCode())
		}
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		runErr = errors.Join(fmt.Errorf("timed out after %s", timeout), <-done)
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		runErr = errors.Join(ctx.Err(), <-done)
	}
	res.Took = time.Since(start)
	data, _ := os.ReadFile(outPath)
	res.Output = string(data)
	if runErr == nil {
		var missing []string
		for _, e := range b.Expect {
			if !strings.Contains(res.Output, e) {
				missing = append(missing, fmt.Sprintf("%q", e))
			}
		}
		if len(missing) > 0 {
			runErr = fmt.Errorf("output lacks %s", strings.Join(missing, ", "))
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("%s: %w\n--- script ---\n%s--- output ---\n%s", b.Where(), runErr, script, res.Output)
	}
	return res, nil
}

// Close kills what the page's blocks left running (each block's process
// group) and removes their output.
func (s *Session) Close() {
	for _, pgid := range s.groups {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	if len(s.groups) > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	for _, pgid := range s.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	s.groups = nil
	if s.outDir != "" {
		_ = os.RemoveAll(s.outDir)
		s.outDir = ""
	}
}

// Missing returns the programs of b.Needs that are not on PATH.
func Missing(b Block) []string {
	var missing []string
	for _, p := range b.Needs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}
