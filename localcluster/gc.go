package localcluster

import (
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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kube-controller-manager's garbage collector learns which resources exist
// when it starts, and then only at its discovery resync, every 30 seconds.
// kwokctl starts it together with the API server, before our CRDs exist:
// for up to 30 s after they are installed a deleted claim would keep its
// Sandbox, and a deleted Sandbox its Pod. So once the CRDs are installed
// the cluster restarts kube-controller-manager (with the command line
// kwokctl gave it) and waits until its garbage collector collects what an
// object of our kinds owned.

const controllerManager = "kube-controller-manager"

// gcWait bounds the wait for the restarted garbage collector.
const gcWait = 2 * time.Minute

// collectOurKinds restarts kube-controller-manager and waits until its
// garbage collector knows our kinds.
func (c *Cluster) collectOurKinds(ctx context.Context) error {
	if err := c.restartControllerManager(ctx); err != nil {
		return fmt.Errorf("restarting %s so that garbage collection knows the CRDs: %w", controllerManager, err)
	}
	return c.waitCollecting(ctx)
}

// restartControllerManager stops the kube-controller-manager kwokctl
// started (its pid file) and starts it again with the same command line,
// working directory and log, its pid in the same pid file (where kwokctl
// finds it to stop it), without leader election: the new process must not
// wait for the lease of the one it replaces.
func (c *Cluster) restartControllerManager(ctx context.Context) error {
	pidPath := filepath.Join(c.dir(), "pids", controllerManager+".pid")
	raw, err := os.ReadFile(pidPath)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("pid file %s: %w", pidPath, err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return fmt.Errorf("reading the command line of pid %d: %w", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 || filepath.Base(args[0]) != controllerManager {
		return fmt.Errorf("pid %d is not %s: %q", pid, controllerManager, args)
	}
	dir, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		return fmt.Errorf("reading the working directory of pid %d: %w", pid, err)
	}
	if err := stopProcess(ctx, pid); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(c.dir(), "logs", controllerManager+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	// The last occurrence of a flag wins.
	cmd := exec.Command(args[0], append(args[1:], "--leader-elect=false")...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped while this process lives
	return os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o640)
}

// stopProcess sends pid SIGTERM and waits until it is gone (or a zombie),
// then SIGKILL after 20 seconds.
func stopProcess(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || isZombie(stat) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitCollecting waits until the garbage collector removes a ConfigMap
// owned by a SandboxTemplate once the template is deleted: it then watches
// our kinds. The probe objects are removed either way.
func (c *Cluster) waitCollecting(ctx context.Context) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	const name = "agent-sandbox-gc-probe"
	owner := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": metav1.NamespaceDefault},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "probe", "image": "probe"}}}}},
	}}
	if cl, err = c.createServed(ctx, cl, owner); err != nil {
		return fmt.Errorf("creating the garbage collection probe: %w", err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: name, UID: owner.GetUID()}}}}
	if err := cl.Create(ctx, dependent); err != nil {
		return fmt.Errorf("creating the garbage collection probe: %w", err)
	}
	uid := owner.GetUID()
	if err := cl.Delete(ctx, owner, client.Preconditions{UID: &uid}); err != nil {
		return fmt.Errorf("deleting the garbage collection probe: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, gcWait)
	defer cancel()
	for {
		err := cl.Get(wctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-wctx.Done():
			cuid := dependent.UID
			_ = cl.Delete(context.WithoutCancel(ctx), dependent, client.Preconditions{UID: &cuid})
			return fmt.Errorf("garbage collection did not remove what a SandboxTemplate owned within %s (see %s): %w",
				gcWait, filepath.Join(c.dir(), "logs", controllerManager+".log"), errors.Join(wctx.Err(), err))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createServed creates obj once the API server serves its kind: a CRD
// installed a moment ago may not be in discovery yet (the client's
// RESTMapper answers "no matches for kind"), so the create is tried again,
// with a client whose mapper reads discovery anew, for up to gcWait. It
// returns the client that succeeded.
func (c *Cluster) createServed(ctx context.Context, cl client.Client, obj client.Object) (client.Client, error) {
	deadline := time.Now().Add(gcWait)
	for {
		err := cl.Create(ctx, obj)
		if err == nil || (!meta.IsNoMatchError(err) && !apierrors.IsNotFound(err)) || time.Now().After(deadline) {
			return cl, err
		}
		select {
		case <-ctx.Done():
			return cl, errors.Join(ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
		if fresh, cerr := c.Client(); cerr == nil {
			cl = fresh
		}
	}
}
