package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

var execCommand = exec.CommandContext

// TestStandInRunsSandboxes: on the local cluster a Sandbox's Pod is served
// by a real sandbox-runtime process. Through client-go's port-forward
// (pods/portforward, as the router and the SDK reach a Pod) /execute runs
// `echo hi`; a file uploaded before a suspend is there after the resume
// (the work directory belongs to the Sandbox) and `kubectl exec` reads it; a
// restarted stand-in adopts the running process; `kubectl logs` shows the
// runtime's log; deleting the Sandbox stops the process and removes the
// directory.
func TestStandInRunsSandboxes(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ctx := context.Background()
	ns := namespace(t, c)
	key := types.NamespacedName{Namespace: ns, Name: "runner"}
	sbKey := standin.Key{Namespace: ns, Name: "runner"}
	if err := c.Create(ctx, sandbox(ns, "runner")); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Minute, "Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	start := time.Now()
	base := forward(t, local.Config, ns, "runner")
	t.Logf("Ready after %s; the runtime answered through a port-forward %s later", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	res, err := execute(base, "echo hi")
	if err != nil || res.Stdout != "hi\n" || res.ExitCode != 0 {
		t.Fatalf("POST /execute echo hi = %+v, %v; want stdout \"hi\\n\", exit code 0", res, err)
	}
	const content = "written before the suspend\n"
	if err := upload(base, "notes.txt", content); err != nil {
		t.Fatal(err)
	}
	first := runtimeState(t, ns, "runner")
	if !processRuns(first.PID) {
		t.Fatalf("runtime pid %d of the state %+v does not run", first.PID, first)
	}
	socks, err := tests.Listening(first.PID)
	if err != nil {
		t.Fatal(err)
	}
	assertLoopback(t, socks, "sandbox-runtime")
	workDir := standin.WorkDir(standIn.Dir, sbKey)

	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended)
	waitFor(t, time.Minute, "Pod gone and its runtime stopped", func() error {
		if err := gone(c, key, &corev1.Pod{})(); err != nil {
			return err
		}
		if processRuns(first.PID) {
			return fmt.Errorf("runtime pid %d still runs", first.PID)
		}
		return kwokObjectsGone(ns, "runner")
	})
	if data, err := os.ReadFile(filepath.Join(workDir, "notes.txt")); err != nil || string(data) != content {
		t.Fatalf("work directory while suspended: %q, %v", data, err)
	}

	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning)
	waitFor(t, time.Minute, "Ready after resume", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	base = forward(t, local.Config, ns, "runner")
	if got, err := download(base, "notes.txt"); err != nil || got != content {
		t.Fatalf("after resume, /download/notes.txt = %q, %v; want %q", got, err, content)
	}
	second := runtimeState(t, ns, "runner")
	if second.PID == first.PID || second.PodUID == first.PodUID {
		t.Errorf("after resume the state is %+v, before %+v: want a new process for the new Pod", second, first)
	}

	// A stand-in that is killed and started again adopts the process.
	if err := standIn.Crash(); err != nil {
		t.Fatal(err)
	}
	if !processRuns(second.PID) {
		t.Fatalf("runtime pid %d stopped with the stand-in", second.PID)
	}
	log, err := os.OpenFile(filepath.Join(e2eWorkdir, "standin.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if standIn, err = cluster.StartStandIn(local, runtimeBin, slog.New(slog.NewTextHandler(log, nil))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the restarted stand-in adopts the runtime", func() error {
		res, err := execute(forward(t, local.Config, ns, "runner"), "cat notes.txt")
		if err != nil {
			return err
		}
		if res.Stdout != content {
			return fmt.Errorf("cat notes.txt = %+v", res)
		}
		if st := runtimeState(t, ns, "runner"); st.PID != second.PID {
			return fmt.Errorf("state %+v after the restart, want pid %d", st, second.PID)
		}
		return nil
	})

	kctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := kubectl(kctx, local.Kubeconfig, "exec", "-n", ns, "runner", "--", "cat", "notes.txt")
	if err != nil || out != content {
		t.Fatalf("kubectl exec cat notes.txt = %q, %v; want %q", out, err, content)
	}
	if out, err := kubectl(kctx, local.Kubeconfig, "exec", "-n", ns, "runner", "--", "pwd"); err != nil || strings.TrimSpace(out) != workDir {
		t.Errorf("kubectl exec pwd = %q, %v; want the work directory %s", out, err, workDir)
	}
	waitFor(t, 30*time.Second, "kubectl logs shows the runtime's log", func() error {
		out, err := kubectl(kctx, local.Kubeconfig, "logs", "-n", ns, "runner")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "msg=serving") || !strings.Contains(out, "msg=execute") {
			return fmt.Errorf("kubectl logs = %q", out)
		}
		return nil
	})

	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, key, sb); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, sb); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, time.Minute, "runtime stopped and work directory removed", func() error {
		if processRuns(second.PID) {
			return fmt.Errorf("runtime pid %d still runs", second.PID)
		}
		if _, err := os.Stat(standin.SandboxDir(standIn.Dir, sbKey)); err == nil {
			return errors.New("the sandbox directory is still there")
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	t.Logf("after the Sandbox was deleted, its runtime stopped and its directory went within %s (garbage collection of the Pod included)", took.Round(time.Millisecond))
}

// kwokObjectsGone checks that a Pod's PortForward, Exec and Logs objects
// are deleted.
func kwokObjectsGone(ns, pod string) error {
	dyn, err := dynamic.NewForConfig(local.Config)
	if err != nil {
		return err
	}
	for _, r := range []string{"portforwards", "execs", "logs"} {
		gvr := schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: r}
		_, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("%s %s: still there", r, pod)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
