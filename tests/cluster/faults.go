package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Stopped is a control-plane component stopped by StopComponent.
type Stopped struct {
	c         *Cluster
	name      string
	argv, env []string
	dir       string
}

// StopComponent stops one process of a kwok cluster (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok-controller): SIGTERM, and
// SIGKILL if it has not exited after grace (kube-apiserver drains for up to
// a minute). It remembers the command line, environment and working
// directory so that Start brings the same component back. The others keep
// running. Fault-injection tests use it.
func StopComponent(c *Cluster, name string, grace time.Duration) (*Stopped, error) {
	pidFile := filepath.Join(c.Dir(), "pids", name+".pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return nil, fmt.Errorf("component %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("component %s: pid file %s: %w", name, pidFile, err)
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil {
		return nil, fmt.Errorf("component %s (pid %d) is not running: %w", name, pid, err)
	}
	environ, err := os.ReadFile(filepath.Join(proc, "environ"))
	if err != nil {
		return nil, err
	}
	dir, err := os.Readlink(filepath.Join(proc, "cwd"))
	if err != nil {
		return nil, err
	}
	s := &Stopped{c: c, name: name, argv: split0(cmdline), env: split0(environ), dir: dir}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(grace)
	killed := false
	for alive(pid) {
		if !killed && time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = true
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			return nil, fmt.Errorf("component %s (pid %d) survived SIGKILL", name, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s, nil
}

// Start runs the stopped component again, appending to its kwok log and
// recording its new pid where kwokctl looks (so that deleting the cluster
// stops it too). For kube-apiserver it waits until /readyz answers.
func (s *Stopped) Start(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(s.c.Dir(), "logs", s.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting %s: %w", s.name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it when the cluster is deleted
	if err := os.WriteFile(filepath.Join(s.c.Dir(), "pids", s.name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	if s.name != "kube-apiserver" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(s.c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after restart: %w", errors.Join(ctx.Err(), err))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return !(i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z')
}

func split0(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(p))
	}
	return out
}
