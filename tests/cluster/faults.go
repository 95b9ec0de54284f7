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

// Component is one control-plane process of a kwok cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok-controller) with what it takes to start it again: its command line,
// environment and working directory. Fault-injection tests stop and start
// them; in a real cluster the kubelet restarts a component that exits (the
// scheduler and the controller manager exit when they lose their leader
// Lease during an API server outage), and Revive plays that part.
type Component struct {
	Name      string
	PID       int
	c         *Cluster
	argv, env []string
	dir       string
}

// Components reads every component kwokctl started (its pids/ directory).
func Components(c *Cluster) ([]*Component, error) {
	files, err := filepath.Glob(filepath.Join(c.Dir(), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	var out []*Component
	for _, f := range files {
		comp, err := component(c, strings.TrimSuffix(filepath.Base(f), ".pid"))
		if err != nil {
			return nil, err
		}
		out = append(out, comp)
	}
	return out, nil
}

func component(c *Cluster, name string) (*Component, error) {
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
	return &Component{Name: name, PID: pid, c: c, argv: split0(cmdline), env: split0(environ), dir: dir}, nil
}

// StopComponent stops the named component: SIGTERM, and SIGKILL if it has
// not exited after grace (kube-apiserver drains for up to a minute).
func StopComponent(c *Cluster, name string, grace time.Duration) (*Component, error) {
	comp, err := component(c, name)
	if err != nil {
		return nil, err
	}
	return comp, comp.Stop(grace)
}

// Stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *Component) Stop(grace time.Duration) error {
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
	killed := false
	for p.Alive() {
		if !killed && time.Now().After(deadline) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			killed = true
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			return fmt.Errorf("component %s (pid %d) survived SIGKILL", p.Name, p.PID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Alive reports whether the component's process runs.
func (p *Component) Alive() bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Start runs the component again, appending to its kwok log and recording
// its new pid where kwokctl looks (so that deleting the cluster stops it
// too). For kube-apiserver it waits until /readyz answers.
func (p *Component) Start(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(p.c.Dir(), "logs", p.Name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting %s: %w", p.Name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it when the cluster is deleted
	p.PID = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(p.c.Dir(), "pids", p.Name+".pid"), []byte(strconv.Itoa(p.PID)), 0o644); err != nil {
		return err
	}
	if p.Name != "kube-apiserver" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(p.c.Config)
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

// Revive starts every component in comps that is no longer running, as the
// kubelet would, and returns their names.
func Revive(ctx context.Context, comps []*Component) ([]string, error) {
	var revived []string
	for _, p := range comps {
		if p.Alive() {
			continue
		}
		if err := p.Start(ctx); err != nil {
			return revived, err
		}
		revived = append(revived, p.Name)
	}
	return revived, nil
}

func split0(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(p))
	}
	return out
}
