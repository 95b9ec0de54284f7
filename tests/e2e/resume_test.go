package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestResumeOnConnect: on the local cluster with the stand-in kubelet, a
// claimed Sandbox whose template opted in (agents.x-k8s.io/resume-on-connect)
// is suspended, and the SDK's next Run on the same handle resumes it and
// returns output, with the file written before the suspend still there:
// through the router and by port-forward. A claim with a few seconds of
// agents.x-k8s.io/idle-timeout is suspended by the controller once idle, not
// while commands keep coming, and the next request wakes it. A Sandbox that
// did not opt in is never resumed: the router answers 409 with the opt-in
// hint and the SDK fails with ErrSuspended.
func TestResumeOnConnect(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	sdkPool(t, c, ns, 2, func(tpl *extv1beta1.SandboxTemplate) {
		tpl.Annotations = map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}
	})
	r := startRouter(t)

	t.Run("port-forward", func(t *testing.T) { resumeByRun(t, c, ns) })
	t.Run("router", func(t *testing.T) { resumeByRun(t, c, ns, sdk.WithRouter(r.URL)) })
	t.Run("idle", func(t *testing.T) { idleSuspend(t, c, ns, r.URL) })
	t.Run("not-opted-in", func(t *testing.T) { notOptedIn(t, c, ns, r.URL) })
}

func resumeByRun(t *testing.T, c client.Client, ns string, opts ...sdk.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc, err := sdk.New(local.Config, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sc.Create(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	const content = "kept while suspended\n"
	if err := sb.Write(ctx, "notes.txt", strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: sb.Name()}
	suspendAndWait(t, c, key)

	began := time.Now()
	res, err := sb.Run(ctx, "cat notes.txt")
	if err != nil || res.Stdout != content || res.ExitCode != 0 {
		t.Fatalf("Run(cat notes.txt) on the suspended Sandbox = %+v, %v; want %q\n%s", res, err, content, sandboxState(c, key))
	}
	t.Logf("the Run that resumed the Sandbox returned after %s", time.Since(began).Round(time.Millisecond))
	modeOwnedBy(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning, sandboxv1beta1.FieldManagerOperatingMode)
}

// suspendAndWait suspends as a user would and waits for the Pod and its
// runtime process to be gone.
func suspendAndWait(t *testing.T, c client.Client, key types.NamespacedName) {
	t.Helper()
	waitFor(t, time.Minute, "runtime started", func() error {
		_, err := os.Stat(filepath.Join(standin.SandboxDir(standIn.Dir, standin.Key{Namespace: key.Namespace, Name: key.Name}), "state.json"))
		return err
	})
	first := runtimeState(t, key.Namespace, key.Name)
	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended)
	waitSuspended(t, c, key, first.PID)
}

func waitSuspended(t *testing.T, c client.Client, key types.NamespacedName, pid int) {
	t.Helper()
	waitFor(t, time.Minute, "Pod gone and runtime stopped", func() error {
		if err := gone(c, key, &corev1.Pod{})(); err != nil {
			return err
		}
		if processRuns(pid) {
			return fmt.Errorf("runtime pid %d still runs", pid)
		}
		return nil
	})
}

// sandboxState says, for a failure's message, what the cluster holds for
// the Sandbox key: its mode and generation, its conditions, who set its
// operatingMode and when, its Pod, and its events.
func sandboxState(c client.Client, key types.NamespacedName) string {
	ctx := context.Background()
	var b strings.Builder
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, key, sb); err != nil {
		return fmt.Sprintf("Sandbox %s: %v", key, err)
	}
	fmt.Fprintf(&b, "Sandbox %s: operatingMode %q, generation %d\n", key, sb.Spec.OperatingMode, sb.Generation)
	for _, cond := range sb.Status.Conditions {
		fmt.Fprintf(&b, "  condition %s=%s %s (generation %d, since %s): %s\n", cond.Type, cond.Status, cond.Reason,
			cond.ObservedGeneration, cond.LastTransitionTime.UTC().Format(time.RFC3339), cond.Message)
	}
	for _, mf := range sb.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:operatingMode"`) && mf.Time != nil {
			fmt.Fprintf(&b, "  operatingMode set by %s at %s\n", mf.Manager, mf.Time.UTC().Format(time.RFC3339))
		}
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: sb.Name}, pod); err != nil {
		fmt.Fprintf(&b, "  Pod: %v\n", err)
	} else {
		fmt.Fprintf(&b, "  Pod: phase %s, deleting %t, conditions %v\n", pod.Status.Phase, pod.DeletionTimestamp != nil, pod.Status.Conditions)
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(key.Namespace)); err == nil {
		for _, e := range events.Items {
			if e.InvolvedObject.Name == sb.Name {
				fmt.Fprintf(&b, "  event %s %s: %s\n", e.Type, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

// modeOwnedBy checks spec.operatingMode and that manager owns it.
func modeOwnedBy(t *testing.T, c client.Client, key types.NamespacedName, mode sandboxv1beta1.SandboxOperatingMode, manager string) {
	t.Helper()
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(context.Background(), key, sb); err != nil {
		t.Fatal(err)
	}
	if sb.Spec.OperatingMode != mode {
		t.Fatalf("operatingMode = %q; want %q", sb.Spec.OperatingMode, mode)
	}
	for _, mf := range sb.ManagedFields {
		if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:operatingMode"`) {
			return
		}
	}
	t.Errorf("spec.operatingMode is not owned by %s: %v", manager, managers(sb.ManagedFields))
}

func managers(mfs []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, mf := range mfs {
		out = append(out, mf.Manager+"/"+string(mf.Operation))
	}
	return out
}

func idleSuspend(t *testing.T, c client.Client, ns, routerURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle", Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "4s"}},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	sc, err := sdk.New(local.Config, sdk.WithRouter(routerURL))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sc.Open(ctx, ns, "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	key := types.NamespacedName{Namespace: ns, Name: sb.Name()}
	got := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[sandboxv1beta1.AnnotationIdleTimeout] != "4s" {
		t.Fatalf("the claim's idle-timeout did not reach its Sandbox: annotations %v", got.Annotations)
	}
	if err := sb.Write(ctx, "idle.txt", strings.NewReader("still here\n")); err != nil {
		t.Fatal(err)
	}
	// Traffic every second for twice the timeout: never idle.
	var last time.Time
	for range 8 {
		if _, err := sb.Run(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		time.Sleep(time.Second)
	}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		t.Fatal("suspended while commands kept coming")
	}
	if got.Annotations[sandboxv1beta1.AnnotationLastActivity] == "" {
		t.Errorf("no %s annotation after 8 s of traffic through the router", sandboxv1beta1.AnnotationLastActivity)
	}
	pid := runtimeState(t, ns, sb.Name()).PID
	quiet := time.Now()
	waitFor(t, time.Minute, "suspended once idle", func() error {
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		if got.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
			return errors.New("still running")
		}
		return nil
	})
	t.Logf("suspended within %s of the last command (idle-timeout 4s; looked for from %s after it)",
		time.Since(last).Round(time.Millisecond), quiet.Sub(last).Round(time.Millisecond))
	if time.Since(last) < 4*time.Second {
		t.Errorf("suspended %s after the last command: before its idle-timeout of 4s", time.Since(last).Round(time.Millisecond))
	}
	modeOwnedBy(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended, sandboxv1beta1.FieldManagerOperatingMode)
	waitSuspended(t, c, key, pid)
	res, err := sb.Run(ctx, "cat idle.txt")
	if err != nil || res.Stdout != "still here\n" {
		t.Fatalf("Run after the idle suspend = %+v, %v; want the file\n%s", res, err, sandboxState(c, key))
	}
	modeOwnedBy(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning, sandboxv1beta1.FieldManagerOperatingMode)
}

func notOptedIn(t *testing.T, c client.Client, ns, routerURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := types.NamespacedName{Namespace: ns, Name: "plain"}
	if err := c.Create(ctx, sandbox(ns, "plain")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	suspendAndWait(t, c, key)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, routerURL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sdk.HeaderSandboxID, "plain")
	req.Header.Set(sdk.HeaderSandboxNamespace, ns)
	req.Header.Set(sdk.HeaderSandboxPort, "8888")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 4096)
	n, _ := resp.Body.Read(body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body[:n]), sandboxv1beta1.AnnotationResumeOnConnect) {
		t.Fatalf("router on a Suspended Sandbox that did not opt in: %d %s; want 409 with the opt-in hint", resp.StatusCode, body[:n])
	}
	sc, err := sdk.New(local.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Open(ctx, ns, "plain"); !errors.Is(err, sdk.ErrSuspended) {
		t.Fatalf("SDK Open of a Suspended Sandbox that did not opt in: %v; want ErrSuspended", err)
	}
	time.Sleep(2 * time.Second)
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, key, sb); err != nil {
		t.Fatal(err)
	}
	if sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		t.Fatalf("a Sandbox that did not opt in was resumed by traffic (managers %v)", managers(sb.ManagedFields))
	}
}
