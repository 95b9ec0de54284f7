package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// BuildController builds cmd/sandbox-controller into dir and returns its path.
func BuildController(dir string) (string, error) {
	bin := filepath.Join(dir, "sandbox-controller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sandbox-controller")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the controller: %w\n%s", err, out)
	}
	return bin, nil
}

// Controller is a running controller binary.
type Controller struct {
	Cmd *exec.Cmd
	// Metrics and Probe are the addresses of /metrics and /readyz.
	Metrics, Probe string
	// LogPath is where its output goes.
	LogPath string
	exited  chan error
}

// StartController runs bin against a kubeconfig with free metrics and
// probe ports plus args, logging to logPath, and waits until it is ready.
func StartController(bin, kubeconfig, logPath string, args ...string) (*Controller, error) {
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	c := &Controller{Metrics: metrics, Probe: probe, LogPath: logPath, exited: make(chan error, 1)}
	c.Cmd = exec.Command(bin, append([]string{"--kubeconfig", kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe}, args...)...)
	c.Cmd.Stdout, c.Cmd.Stderr = logFile, logFile
	if err := c.Cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	go func() { c.exited <- c.Cmd.Wait(); _ = logFile.Close() }()
	if err := WaitReady(probe, c.exited, time.Minute); err != nil {
		_ = c.Cmd.Process.Kill()
		return nil, fmt.Errorf("controller: %w (log %s)", err, logPath)
	}
	return c, nil
}

// Stop sends SIGTERM and waits up to 30 seconds for a clean exit.
func (c *Controller) Stop() error {
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-c.exited:
		return err
	case <-time.After(30 * time.Second):
		_ = c.Cmd.Process.Kill()
		return fmt.Errorf("controller did not stop within 30s of SIGTERM")
	}
}
