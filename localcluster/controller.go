package localcluster

import (
	"bytes"
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

// FreeAddr returns a loopback address with a port that is free right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// WaitReady polls http://<probe>/readyz until it answers 200, the process
// reports its exit on exited, or timeout passes.
func WaitReady(probe string, exited <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the process exited before it was ready: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
	}
}

// ControllerOptions say how to run the controller binary.
type ControllerOptions struct {
	Binary     string
	Kubeconfig string
	// LogPath receives its output.
	LogPath string
	// Args are passed after --kubeconfig and the metrics and probe
	// addresses (chosen free on loopback).
	Args []string
	// Detach starts it in a session of its own, so that it outlives the
	// calling process and a terminal's Ctrl-C does not reach it.
	Detach bool
	// ReadyTimeout bounds the wait for /readyz (default one minute).
	ReadyTimeout time.Duration
}

// Controller is a controller process started by StartController.
type Controller struct {
	PID int
	// Metrics and Probe are the addresses of /metrics and /readyz.
	Metrics, Probe string
	LogPath        string
	// Cmd is the process; its Wait is owned by this package.
	Cmd    *exec.Cmd
	exited chan error
}

// StartController runs the controller and waits until /readyz answers 200.
// If it exits or is not ready in time, it is killed and the error carries
// the end of its log. When the metrics or probe port it chose was taken
// before the controller listened on it, it starts again on fresh ports; a
// port of o.Args that was taken is reported as ErrPortTaken.
func StartController(o ControllerOptions) (*Controller, error) {
	for attempt := 1; ; attempt++ {
		c, err := startController(o)
		var taken *portTakenError
		if err == nil || attempt == startAttempts || !errors.As(err, &taken) || !taken.ours {
			return c, err
		}
	}
}

func startController(o ControllerOptions) (*Controller, error) {
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = time.Minute
	}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig", o.Kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe}, o.Args...)
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Its own process group: the caller stops it in order after Ctrl-C.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	c := &Controller{PID: cmd.Process.Pid, Metrics: metrics, Probe: probe, LogPath: o.LogPath, Cmd: cmd, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait(); _ = logFile.Close() }()
	if err := WaitReady(probe, c.exited, o.ReadyTimeout); err != nil {
		return nil, startFailed("controller", cmd.Process, err, o.LogPath, probe, metrics)
	}
	return c, nil
}

// Exited delivers the process's Wait result once, when it ends.
func (c *Controller) Exited() <-chan error { return c.exited }

// Stop sends SIGTERM and waits up to 30 seconds for a clean exit, then kills.
func (c *Controller) Stop() error {
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return err
	}
	select {
	case err := <-c.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
			return fmt.Errorf("controller ended by %v", exit.Sys().(syscall.WaitStatus).Signal())
		}
		return err
	case <-time.After(30 * time.Second):
		_ = c.Cmd.Process.Kill()
		return errors.New("the controller did not stop within 30s of SIGTERM and was killed")
	}
}

// StopPID stops a process this process did not start (a detached controller
// found through its state file): SIGTERM, up to timeout for it to exit, then
// SIGKILL. A process that is already gone is not an error. The command line
// must still contain want, so a recycled PID is never signalled.
func StopPID(pid int, want string, timeout time.Duration) error {
	if !Alive(pid, want) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil //nolint:nilerr // gone between the check and the signal
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !Alive(pid, want) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("process %d did not stop within %s of SIGTERM and was killed", pid, timeout)
}

// Alive reports whether pid runs (not a zombie) with want in its command line.
func Alive(pid int, want string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(want)) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !isZombie(stat)
}

// state is what `up` leaves for `down`: the detached controller's and
// router's PIDs and their command line marker (the cluster's kubeconfig, a
// prefix of theirs), the router's URL and the stand-in kubelet's PID (its
// marker is its --dir), one "key=value" per line.
type state struct {
	ControllerPID int
	StandInPID    int
	RouterPID     int
	RouterURL     string
	Marker        string
	Metrics       string
	LogPath       string
	Kubeconfig    string
	Kind          bool
}

func statePath(workdir, name string) string { return filepath.Join(workdir, name+".state") }

func writeState(path string, s state) error {
	data := fmt.Sprintf("controller-pid=%d\nstandin-pid=%d\nrouter-pid=%d\nrouter-url=%s\nmarker=%s\nmetrics=%s\nlog=%s\nkubeconfig=%s\nkind=%t\n",
		s.ControllerPID, s.StandInPID, s.RouterPID, s.RouterURL, s.Marker, s.Metrics, s.LogPath, s.Kubeconfig, s.Kind)
	return os.WriteFile(path, []byte(data), 0o644)
}

func readState(path string) (state, error) {
	var s state
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch k {
		case "controller-pid":
			s.ControllerPID, _ = strconv.Atoi(v)
		case "standin-pid":
			s.StandInPID, _ = strconv.Atoi(v)
		case "router-pid":
			s.RouterPID, _ = strconv.Atoi(v)
		case "router-url":
			s.RouterURL = v
		case "marker":
			s.Marker = v
		case "metrics":
			s.Metrics = v
		case "log":
			s.LogPath = v
		case "kubeconfig":
			s.Kubeconfig = v
		case "kind":
			s.Kind = v == "true"
		}
	}
	return s, nil
}
