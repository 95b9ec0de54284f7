package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestSDKOnLocalCluster: the Go SDK claims sandboxes from a warm pool of
// the local cluster (the stand-in kubelet runs them) once through the
// sandbox router, started as `kubectl sandbox up` starts it, and once
// straight to the Pod by port-forward: it runs `echo hi`, writes, reads,
// lists and finds a file; the file survives a suspend and resume of the
// claimed Sandbox; Close deletes the claim and the runtime process goes.
func TestSDKOnLocalCluster(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	sdkPool(t, c, ns, 2)
	r := startRouter(t)
	for _, tc := range []struct {
		name string
		opts []sdk.Option
	}{
		{"router", []sdk.Option{sdk.WithRouter(r.URL)}},
		{"port-forward", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { sdkRoundTrip(t, c, ns, tc.name == "router", tc.opts...) })
	}
}

func sdkRoundTrip(t *testing.T, c client.Client, ns string, viaRouter bool, opts ...sdk.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc, err := sdk.New(local.Config, opts...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sb, err := sc.Create(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = sb.Close(context.Background())
		}
	}()
	t.Logf("claim %s: Sandbox %s usable after %s", sb.ClaimName(), sb.Name(), time.Since(start).Round(time.Millisecond))
	res, err := sb.Run(ctx, "echo hi")
	if err != nil || res.Stdout != "hi\n" || res.ExitCode != 0 {
		t.Fatalf("Run(echo hi) = %+v, %v; want stdout \"hi\\n\"", res, err)
	}
	const content = "kept across suspend and resume\n"
	if err := sb.Write(ctx, "data/notes.txt", strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	checkFile(ctx, t, sb, "data/notes.txt", content)
	entries, err := sb.List(ctx, "data")
	if err != nil || len(entries) != 1 || entries[0].Name != "notes.txt" || entries[0].Size != int64(len(content)) ||
		entries[0].Type != sdk.FileTypeFile || entries[0].ModTime.IsZero() {
		t.Fatalf("List(data) = %+v, %v", entries, err)
	}
	if ok, err := sb.Exists(ctx, "data/missing.txt"); err != nil || ok {
		t.Fatalf("Exists(data/missing.txt) = %v, %v; want false", ok, err)
	}
	if _, err := sb.Read(ctx, "data/missing.txt"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Read(data/missing.txt): %v; want ErrNotFound", err)
	}

	// Suspend and resume the claimed Sandbox: a new Pod, a new runtime
	// process, the same work directory.
	key := types.NamespacedName{Namespace: ns, Name: sb.Name()}
	first := runtimeState(t, ns, sb.Name())
	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended)
	waitFor(t, time.Minute, "runtime stopped while suspended", func() error {
		if processRuns(first.PID) {
			return fmt.Errorf("runtime pid %d still runs", first.PID)
		}
		return nil
	})
	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning)
	waitFor(t, time.Minute, "Ready after resume", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	// The same handle goes on working, through the router and by
	// port-forward alike (the SDK follows the Pod and drops a tunnel to
	// the one that went): reads are retried until the new Pod answers.
	after := sb
	resumed := time.Now()
	waitFor(t, time.Minute, "the file read back after resume", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		err := readFile(rctx, after, "data/notes.txt", content)
		if rctx.Err() != nil {
			// Failing fast (the new runtime not answering yet) is
			// retried; hanging is not: the handle still talks to the
			// Pod that went.
			t.Fatalf("a read on the handle hung for 10s after the resume: %v", err)
		}
		return err
	})
	t.Logf("read back %s after the Sandbox was Ready again", time.Since(resumed).Round(time.Millisecond))
	second := runtimeState(t, ns, sb.Name())
	if second.PID == first.PID {
		t.Errorf("the runtime pid %d did not change across suspend and resume", first.PID)
	}

	claim := sb.ClaimName()
	closed = true
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "claim gone and runtime stopped", func() error {
		if err := gone(c, types.NamespacedName{Namespace: ns, Name: claim}, &extv1beta1.SandboxClaim{})(); err != nil {
			return err
		}
		if processRuns(second.PID) {
			return fmt.Errorf("runtime pid %d still runs", second.PID)
		}
		return nil
	})
}

func checkFile(ctx context.Context, t *testing.T, sb *sdk.Sandbox, name, want string) {
	t.Helper()
	if err := readFile(ctx, sb, name, want); err != nil {
		t.Fatal(err)
	}
	if ok, err := sb.Exists(ctx, name); err != nil || !ok {
		t.Fatalf("Exists(%s) = %v, %v; want true", name, ok, err)
	}
}

func readFile(ctx context.Context, sb *sdk.Sandbox, name, want string) error {
	rc, err := sb.Read(ctx, name)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	got, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("Read(%s): %w", name, err)
	}
	if string(got) != want {
		return fmt.Errorf("Read(%s) = %q; want %q", name, got, want)
	}
	return nil
}

// sdkPool makes the template "tpl" (changed by mutate) and the warm pool
// "pool" in ns and waits until the pool is full.
func sdkPool(t *testing.T, c client.Client, ns string, replicas int32, mutate ...func(*extv1beta1.SandboxTemplate)) {
	t.Helper()
	tpl := e2eTemplate(ns, "tpl")
	for _, m := range mutate {
		m(tpl)
	}
	for _, o := range []client.Object{tpl, e2ePool(ns, "pool", "tpl", replicas)} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "pool full", poolReady(c, ns, "pool", replicas))
}

var (
	routerOnce sync.Once
	routerBin  string
	routerErr  error
)

// buildRouter builds cmd/sandbox-router once for the package.
func buildRouter(t *testing.T) string {
	t.Helper()
	routerOnce.Do(func() {
		routerBin = filepath.Join(e2eWorkdir, "sandbox-router")
		cmd := exec.Command("go", "build", "-o", routerBin, "./cmd/sandbox-router")
		cmd.Dir = tests.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			routerErr = fmt.Errorf("building the router: %w\n%s", err, out)
		}
	})
	if routerErr != nil {
		t.Fatal(routerErr)
	}
	return routerBin
}

// startRouter runs the sandbox router for the package's cluster as `kubectl
// sandbox up` runs it (its ServiceAccount and ClusterRole by impersonation,
// kwok transport (kind: port-forward), no authentication, loopback only) and stops it
// when the test ends; args are added to its flags.
func startRouter(t *testing.T, args ...string) *localcluster.Router {
	t.Helper()
	bin := buildRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := freePort(t)
	r, err := localcluster.StartRouter(ctx, local, localcluster.RouterOptions{
		Binary: bin, Port: port, LogPath: filepath.Join(e2eWorkdir, fmt.Sprintf("router-%d.log", time.Now().UnixNano())), Args: args,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stopping the router: %v", err)
		}
	})
	socks, err := tests.Listening(r.PID)
	if err != nil {
		t.Fatal(err)
	}
	assertLoopback(t, socks, "sandbox-router")
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	addr := freeAddr(t)
	var port int
	if _, err := fmt.Sscanf(addr[strings.LastIndexByte(addr, ':')+1:], "%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}
