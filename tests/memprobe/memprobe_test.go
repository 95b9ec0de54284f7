package memprobe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// status is the process's resident memory, whole and split (/proc).
func status(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	r, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	var out []string
	for _, l := range strings.Split(string(b)+string(r), "\n") {
		for _, k := range []string{"VmRSS", "VmHWM", "RssAnon", "RssFile", "Anonymous:", "Private_Dirty"} {
			if strings.HasPrefix(l, k) {
				out = append(out, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	if cpu, faults, err := tests.ProcCPU(pid); err == nil {
		out = append(out, fmt.Sprintf("CPU: %.2f s; minor faults: %d", cpu, faults))
	}
	return strings.Join(out, "; ")
}

// metrics is the controller's Go memory gauges, MiB (goroutines a count).
func metrics(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes ", "go_memstats_sys_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_next_gc_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines"} {
			if strings.HasPrefix(l, k) {
				f := strings.Fields(l)
				v, _ := strconv.ParseFloat(f[1], 64)
				out = append(out, fmt.Sprintf("%s=%.2fM", strings.TrimPrefix(f[0], "go_memstats_"), v/(1<<20)))
			}
		}
	}
	return strings.Join(out, " ")
}

// heap saves the controller's heap profile after a collection.
func heap(t *testing.T, addr, name string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Log(err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	p := filepath.Join(os.TempDir(), "memprobe-"+name+".pprof")
	_ = os.WriteFile(p, b, 0o644)
	t.Logf("heap profile %s", p)
}

// TestMemProbe measures the controller's memory at start, with Sandboxes,
// after a suspend and resume of each, and once they are gone (doc.go).
func TestMemProbe(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_MEMPROBE") != "1" {
		t.Skip("AGENT_SANDBOX_MEMPROBE=1")
	}
	n, _ := strconv.Atoi(os.Getenv("MEMPROBE_N"))
	if n == 0 {
		n = 500
	}
	env, err := envtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	bin := os.Getenv("MEMPROBE_BIN")
	kc := env.Kubeconfig(t)
	probe, _ := tests.FreeAddr()
	met, _ := tests.FreeAddr()
	pp, _ := tests.FreeAddr()
	cmd := exec.Command(bin, "--kubeconfig", kc, "--leader-elect=false", "--extensions", "--enable-webhook=false",
		"--metrics-bind-address", met, "--health-probe-bind-address", probe, "--enable-pprof", "--pprof-bind-address", pp)
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("MEMPROBE_ARGS"))...)
	logPath := os.Getenv("MEMPROBE_LOG") // the controller's log, kept there
	if logPath == "" {
		logPath = filepath.Join(t.TempDir(), "log")
	}
	logf, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("MEMPROBE_ENV"))...)
	if g := os.Getenv("MEMPROBE_GODEBUG"); g != "" {
		cmd.Env = append(cmd.Env, "GODEBUG="+g)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	if err := tests.WaitReady(probe, exited, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	pid := cmd.Process.Pid
	t.Logf("START %s", status(pid))
	heap(t, pp, "start")
	t.Logf("START %s", metrics(met))
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	// Runtime isolation is enforced by default: the Sandboxes name gVisor,
	// as the bench's do, and the API server must know the class.
	if err := env.EnsureGVisor(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			sb := &sandboxv1beta1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)},
				Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
					Service: ptr.To(true),
					PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
						RuntimeClassName: ptr.To("gvisor"),
						Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
					}},
				}},
			}
			if err := env.Client.Create(ctx, sb); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	waitCond := func(typ, want string) {
		deadline := time.Now().Add(10 * time.Minute)
		for time.Now().Before(deadline) {
			var l sandboxv1beta1.SandboxList
			_ = env.Client.List(ctx, &l, client.InNamespace(ns))
			ready := 0
			for _, s := range l.Items {
				for _, c := range s.Status.Conditions {
					if c.Type == typ && string(c.Status) == want {
						ready++
					}
				}
			}
			if ready == n {
				return
			}
			time.Sleep(time.Second)
		}
		t.Errorf("timed out waiting for %s=%s", typ, want)
	}
	waitCond("Ready", "True")
	time.Sleep(5 * time.Second)
	t.Logf("LOADED %s", status(pid))
	heap(t, pp, "loaded")
	t.Logf("LOADED %s", metrics(met))
	if os.Getenv("MEMPROBE_CYCLE") != "" {
		for _, mode := range []string{"Suspended", "Running"} {
			for i := 0; i < n; i++ {
				sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sb-%d", i)}}
				if err := env.Client.Patch(ctx, sb, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"operatingMode":"`+mode+`"}}`))); err != nil {
					t.Error(err)
				}
			}
			if mode == "Suspended" {
				waitCond("Suspended", "True")
			} else {
				waitCond("Ready", "True")
			}
		}
		time.Sleep(5 * time.Second)
		t.Logf("CYCLED %s", status(pid))
		heap(t, pp, "cycled")
		t.Logf("CYCLED %s", metrics(met))
	}
	_ = env.Client.DeleteAllOf(ctx, &sandboxv1beta1.Sandbox{}, client.InNamespace(ns))
	time.Sleep(20 * time.Second)
	t.Logf("DELETED %s", status(pid))
	heap(t, pp, "deleted")
	t.Logf("DELETED %s", metrics(met))
}
