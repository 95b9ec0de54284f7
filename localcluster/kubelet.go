package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// standInStopTimeout bounds a stand-in's exit after SIGTERM: it stops every
// runtime at once, each with standInGrace before SIGKILL.
const (
	standInStopTimeout = time.Minute
	standInGrace       = 10 * time.Second
)

// SandboxDir is where the stand-in kubelet keeps one directory per Sandbox
// (DIR/<namespace>/<sandbox>/work is its runtime's work directory). It is in
// the cluster's state directory: deleting the cluster removes it.
func (c *Cluster) SandboxDir() string { return filepath.Join(c.dir(), "sandboxes") }

// StandIn is a stand-in kubelet process started by StartStandIn.
type StandIn struct {
	PID     int
	LogPath string
	// Dir is its --dir (Cluster.SandboxDir), also the marker that finds it
	// in /proc.
	Dir    string
	cmd    *exec.Cmd
	exited chan error
}

// StandInOptions say how to run the stand-in kubelet.
type StandInOptions struct {
	// Command runs it, e.g. {"/path/kubectl-sandbox", "kubelet"}; the
	// kubeconfig, directory, runtime and probe flags are added.
	Command []string
	// Runtime is the sandbox-runtime binary.
	Runtime string
	// LogPath receives its output.
	LogPath string
	// Detach starts it in a session of its own (it outlives the caller).
	Detach bool
	// RouterPort is the host router's port on 127.0.0.1 (--router-port):
	// every namespace gets sandbox-router-svc leading there; 0 none.
	RouterPort int
}

// StartStandIn runs the stand-in kubelet against the cluster and waits until
// its Pod cache has synced (/readyz on a free loopback port), and starts it
// again on a fresh port while the one it chose was taken.
func StartStandIn(c *Cluster, o StandInOptions) (*StandIn, error) {
	return RetryPortTaken(func() (*StandIn, error) { return startStandInOnce(c, o) })
}

func startStandInOnce(c *Cluster, o StandInOptions) (*StandIn, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("stand-in kubelet: no command to run it")
	}
	if st, err := os.Stat(o.Runtime); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("sandbox-runtime binary %s: not an executable file (build it with `make runtime`)", o.Runtime)
	}
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, o.Command[1:]...), "--kubeconfig", c.Kubeconfig, "--dir", c.SandboxDir(),
		"--runtime", o.Runtime, "--health-probe-bind-address", probe, "--stop-grace", standInGrace.String())
	if o.RouterPort != 0 {
		args = append(args, "--router-port", strconv.Itoa(o.RouterPort))
	}
	cmd := exec.Command(o.Command[0], args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped in order after Ctrl-C
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the stand-in kubelet: %w", err)
	}
	s := &StandIn{PID: cmd.Process.Pid, LogPath: o.LogPath, Dir: c.SandboxDir(), cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait(); _ = logFile.Close() }()
	if err := WaitReady(probe, s.exited, time.Minute); err != nil {
		return nil, startFailed("stand-in kubelet", cmd.Process, err, o.LogPath, probe)
	}
	return s, nil
}

// Exited delivers the process's Wait result once, when it ends.
func (s *StandIn) Exited() <-chan error { return s.exited }

// Stop sends SIGTERM (the stand-in stops every runtime it runs) and waits;
// past standInStopTimeout it is killed and the runtimes are stopped here.
func (s *StandIn) Stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); errors.Is(err, os.ErrProcessDone) {
		return standin.StopAll(s.Dir, standInGrace) // it exited (and was reaped) already
	} else if err != nil {
		return err
	}
	var err error
	select {
	case err = <-s.exited:
	case <-time.After(standInStopTimeout):
		_ = s.cmd.Process.Kill()
		err = fmt.Errorf("the stand-in kubelet did not stop within %s of SIGTERM and was killed", standInStopTimeout)
	}
	return errors.Join(err, standin.StopAll(s.Dir, standInGrace))
}

// stopStandIn stops a stand-in this process did not start (a detached one,
// found through the state file) and whatever runtimes it left.
func stopStandIn(pid int, dir string) error {
	var err error
	if pid > 0 {
		err = StopPID(pid, dir, standInStopTimeout)
	}
	return errors.Join(err, standin.StopAll(dir, standInGrace))
}
