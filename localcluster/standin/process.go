package standin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Loopback is the only address a runtime process listens on.
const Loopback = "127.0.0.1"

// processSpec is how to start one runtime process.
type processSpec struct {
	Runtime string   // the sandbox-runtime binary
	SbDir   string   // the Sandbox's directory (work/, logs)
	Env     []string // added to the stand-in's environment
	// Pod is the name of the Pod the process serves: a Host the runtime
	// accepts besides loopback names and IP addresses (the Go SDK's
	// port-forward mode addresses the Pod by name).
	Pod string
	// FreshLogs truncates the logs (a new Pod); otherwise they are appended
	// to (the same Pod's process started again).
	FreshLogs bool
	// ShutdownTimeout is the runtime's --shutdown-timeout.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds the wait for the runtime to answer GET /.
	ReadyTimeout time.Duration
}

// startProcess starts sandbox-runtime on free loopback ports (the legacy
// protocol, sandboxd's REST API and its gRPC service, envd) in a session of its
// own (so that it outlives the stand-in, and so that StopAll finds every
// process its commands left, which share that session), and waits until it
// answers GET /. It returns the PID and the ports.
func startProcess(ctx context.Context, p processSpec) (int, ports, error) {
	work := filepath.Join(p.SbDir, workDir)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, ports{}, err
	}
	pp, err := freePorts()
	if err != nil {
		return 0, ports{}, err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if p.FreshLogs {
		flags |= os.O_TRUNC
		for _, f := range []string{criLog, offsetFile} {
			if err := os.Remove(filepath.Join(p.SbDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, ports{}, err
			}
		}
	}
	out, err := os.OpenFile(filepath.Join(p.SbDir, rawLog), flags, 0o644)
	if err != nil {
		return 0, ports{}, err
	}
	defer func() { _ = out.Close() }() // the child has its own descriptor
	addr := net.JoinHostPort(Loopback, strconv.Itoa(pp.legacy))
	cmd := exec.Command(p.Runtime, "--listen-address", addr,
		"--sandboxd-rest-address", net.JoinHostPort(Loopback, strconv.Itoa(pp.rest)),
		"--sandboxd-grpc-address", net.JoinHostPort(Loopback, strconv.Itoa(pp.grpc)),
		"--envd-address", net.JoinHostPort(Loopback, strconv.Itoa(pp.envd)),
		"--base-dir", work, "--shutdown-timeout", p.ShutdownTimeout.String(),
		"--allowed-hosts", allowedHosts(p.Pod))
	cmd.Dir = work
	cmd.Env = append(append(os.Environ(), p.Env...), markerEnv(p.SbDir))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, ports{}, fmt.Errorf("starting %s: %w", p.Runtime, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reaps it, whoever stops it
	pid := cmd.Process.Pid
	if err := waitServing(ctx, addr, exited, p.ReadyTimeout); err != nil {
		_ = stopProcess(pid, p.SbDir, time.Second)
		return 0, ports{}, fmt.Errorf("sandbox-runtime on %s: %w%s", addr, err, logTail(filepath.Join(p.SbDir, rawLog)))
	}
	return pid, pp, nil
}

// allowedHosts is the runtime's --allowed-hosts: it listens on the
// developer's machine, so it answers only requests addressed to it
// (loopback names, an IP address such as the Pod IP the router's
// port-forward transport sends, or the Pod's name, which the Go SDK's
// port-forward mode sends), not a page that DNS rebinding pointed at it. A
// Pod name with a dot could be someone's domain: it is not added.
func allowedHosts(pod string) string {
	if pod == "" || strings.Contains(pod, ".") {
		return "localhost"
	}
	return "localhost," + pod
}

// freePorts returns four loopback ports that are free right now, and
// distinct: each is held until all are chosen. Another process may still
// take one before the runtime listens on it; the runtime then exits, and
// the Pod's reconcile, which returns that error, starts it again on fresh
// ports.
func freePorts() (ports, error) {
	var pp ports
	for _, port := range []*int{&pp.legacy, &pp.rest, &pp.grpc, &pp.envd} {
		l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
		if err != nil {
			return ports{}, err
		}
		defer func() { _ = l.Close() }()
		*port = l.Addr().(*net.TCPAddr).Port
	}
	return pp, nil
}

// waitServing polls http://addr/ until it answers 200.
func waitServing(ctx context.Context, addr string, exited <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before it served")
		case <-ctx.Done():
			return fmt.Errorf("not serving after %s", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func logTail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return ": " + s
	}
	return ""
}

// envMarker is set in a runtime's environment, and so in its commands'
// (unless they clear it): the Sandbox directory it runs for.
const envMarker = "AGENT_SANDBOX_STANDIN_DIR"

func markerEnv(sbDir string) string { return envMarker + "=" + sbDir }

// alive reports whether pid runs (not a zombie) and is the runtime of the
// Sandbox directory sbDir (its base directory is in its command line): a PID
// recorded by an earlier stand-in is trusted only while that holds.
func alive(pid int, sbDir string) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte("\x00"+filepath.Join(sbDir, workDir)+"\x00")) {
		return false
	}
	st, ok := procStat(pid)
	return ok && st.state != 'Z'
}

// marked reports whether pid's environment says it runs for sbDir.
func marked(pid int, sbDir string) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+markerEnv(sbDir)+"\x00"))
}

// stopProcess stops a runtime: SIGTERM (it finishes or kills its running
// commands within its --shutdown-timeout), SIGKILL once grace has passed,
// then SIGKILL for whatever is left of its session (commands run in process
// groups of their own, within the runtime's session). A process that is
// already gone is not an error.
func stopProcess(pid int, sbDir string, grace time.Duration) error {
	if pid <= 0 {
		return nil
	}
	// The session ID is the runtime's PID (it was started with setsid), and
	// Linux hands out no PID still in use as a session ID: while the runtime
	// runs, every member of that session is ours. Once it is gone, the PID
	// may be another session's, so only members marked as ours are killed.
	ours := alive(pid, sbDir)
	if ours {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for alive(pid, sbDir) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid, sbDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		for _, p := range sessionMembers(pid) {
			if ours || marked(p, sbDir) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of runtime session %d survived SIGKILL", left, pid)
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionMembers lists the live (not zombie) processes of session sid.
func sessionMembers(sid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.session == sid && st.state != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

type stat struct {
	state   byte
	session int
}

// procStat reads a process's state and session from /proc/PID/stat:
// "pid (comm) state ppid pgrp session ...".
func procStat(pid int) (stat, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 4 {
		return stat{}, false
	}
	session, err := strconv.Atoi(fields[3])
	if err != nil {
		return stat{}, false
	}
	return stat{state: fields[0][0], session: session}, true
}
