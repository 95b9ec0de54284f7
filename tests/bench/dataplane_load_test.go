package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/tests"
)

// routerPID is the running router's pid, for the CPU profile.
var routerPID int

// routerTransport is the running router's --transport.
var routerTransport string

// startRouter builds bin/sandbox-router's source as the controller is
// built, starts it on 127.0.0.1 with the kwok transport (straight to where
// each Pod's kwok PortForward says its port is, as a router reaches pod
// IPs on a pod network) and no authentication (and BENCH_ROUTER_ARGS:
// --transport=port-forward goes through the API server's port-forward
// instead; its log in BENCH_ROUTER_LOG if set), waits for /readyz and returns its base URL and a stop function
// (its command line names the cluster's kubeconfig, so it must stop
// before the cluster does).
func startRouter(t *testing.T, kubeconfig string, extraArgs ...string) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-router")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sandbox-router")
	build.Dir = tests.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the router: %v\n%s", err, out)
	}
	addr, metrics := freeAddr(t), freeAddr(t)
	// --route-by-claim as the deploy bundle runs it (where the ownership
	// webhook guards it; the bench has a single tenant).
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--transport=kwok", "--auth=none",
		"--allow-local-addresses", "--route-by-claim", "--http-bind-address", addr, "--metrics-bind-address", metrics}, extraArgs...)...)
	// Flags to compare a variant of the router, e.g.
	// BENCH_ROUTER_ARGS="--port-forward-prewarm=0".
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("BENCH_ROUTER_ARGS"))...)
	routerTransport = "kwok"
	for _, a := range cmd.Args {
		if v, ok := strings.CutPrefix(a, "--transport="); ok {
			routerTransport = v // the last one counts
		}
	}
	logPath := filepath.Join(dir, "router.log")
	if p := os.Getenv("BENCH_ROUTER_LOG"); p != "" {
		logPath = p // kept after the run
	}
	exited, stop := startProcess(t, cmd, logPath)
	routerPID, routerMetricsAddr = cmd.Process.Pid, metrics
	if err := tests.WaitReady(metrics, exited, time.Minute); err != nil {
		t.Fatalf("router: %v (log %s)", err, logPath)
	}
	return "http://" + addr, stop
}

// startProcess starts cmd with its output in logPath and stops it
// (SIGTERM, then SIGKILL) when stop is called or the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd, logPath string) (exited <-chan error, stop func()) {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	done := make(chan struct{})
	go func() { ch <- cmd.Wait(); close(done); _ = log.Close() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	return ch, stop
}

// floorRuntimes starts n sandbox-runtime processes on 127.0.0.1, with no
// Kubernetes, and connects the SDK to each with WithBaseURL: the same
// calls as on a claimed sandbox, without the API server in the way.
func floorRuntimes(t *testing.T, runtimeBin string, n int) []*sdk.Sandbox {
	t.Helper()
	out := make([]*sdk.Sandbox, n)
	for i := range out {
		dir := t.TempDir()
		addr := freeAddr(t)
		// The legacy protocol only: sandboxd's default :8080 and :9090, and
		// envd's :49983, would collide between the floor's processes.
		cmd := exec.Command(runtimeBin, "--listen-address", addr, "--sandboxd-rest-address=", "--sandboxd-grpc-address=",
			"--envd-address=", "--base-dir", filepath.Join(dir, "work"))
		logPath := filepath.Join(dir, "runtime.log")
		exited, _ := startProcess(t, cmd, logPath)
		floorPIDs = append(floorPIDs, cmd.Process.Pid)
		// A loaded machine may take seconds to start a process: its
		// address is waited for before the SDK's own (short) retries.
		waitListening(t, addr, exited, logPath, time.Minute)
		sb, err := sdk.Dial(context.Background(), "floor", fmt.Sprintf("floor-%d", i), sdk.WithBaseURL("http://"+addr))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = sb
	}
	return out
}

// waitListening waits until the process that logs to logPath accepts
// connections on addr, and fails the test (with the log) if it exits first.
func waitListening(t *testing.T, addr string, exited <-chan error, logPath string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case werr := <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("the process for %s exited (%v) before it listened:\n%s", addr, werr, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after %s: %v", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// floorPIDs are the floor's runtime processes, for the CPU profile.
var floorPIDs []int

// claimWatch records when the bench's watch first sees each claim Ready.
type claimWatch struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	// clock, if set, is told when claimReadyPhase sent each create, for
	// the floor's per-claim timeline.
	clock *claimClock
}

func watchClaims(t *testing.T, watched cache.Cache) *claimWatch {
	w := &claimWatch{readyAt: map[string]time.Time{}}
	informer, err := watched.GetInformer(context.Background(), &extv1beta1.SandboxClaim{})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(obj any) {
		cl, ok := obj.(*extv1beta1.SandboxClaim)
		if !ok {
			return
		}
		for _, cond := range cl.Status.Conditions {
			if cond.Type == extv1beta1.ConditionReady && cond.Status == metav1.ConditionTrue {
				w.mu.Lock()
				if _, ok := w.readyAt[cl.Name]; !ok {
					w.readyAt[cl.Name] = time.Now()
				}
				w.mu.Unlock()
			}
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) },
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitReady waits until the claim name is seen Ready and returns when.
func (w *claimWatch) waitReady(ctx context.Context, name string) (time.Time, error) {
	for {
		w.mu.Lock()
		at, ok := w.readyAt[name]
		w.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("claim %s: %w", name, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// schedule runs f for 0..n-1, one started every `every` (all at once when
// every is 0), and summarises the durations f returns.
func schedule(n int, every time.Duration, f func(i int) (time.Duration, error), t *testing.T) Latency {
	var (
		mu   sync.Mutex
		lat  []float64
		errs int
		wg   sync.WaitGroup
	)
	gate := make(chan struct{})
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			<-gate
			time.Sleep(time.Duration(i) * every)
			d, err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if errs == 0 {
					t.Logf("claim %d: %v", i, err)
				}
				errs++
				return
			}
			lat = append(lat, ms(d))
		})
	}
	close(gate)
	wg.Wait()
	l := Latency{Claims: n, Errors: errs, Seconds: round2(time.Since(start).Seconds())}
	sort.Float64s(lat)
	if len(lat) > 0 {
		l.P50Ms, l.P99Ms, l.MaxMs = quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1]
	}
	return l
}

// claimReadyPhase is the floor of claim -> first command: claims created
// with a plain client, until seen Ready; then deleted.
func claimReadyPhase(t *testing.T, c client.Client, w *claimWatch, ns, key string, n int, every time.Duration) Latency {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := func(i int) string { return fmt.Sprintf("floor-%s-%d", key, i) }
	l := schedule(n, every, func(i int) (time.Duration, error) {
		cl := &extv1beta1.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)},
			Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
		}
		began := time.Now()
		if err := c.Create(ctx, cl); err != nil {
			return 0, err
		}
		if w.clock != nil {
			w.clock.sentAt(cl.Name, began, time.Since(began))
		}
		at, err := w.waitReady(ctx, cl.Name)
		return at.Sub(began), err
	}, t)
	parallel(n, func(i int) error {
		cl := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		return client.IgnoreNotFound(c.Delete(context.Background(), cl, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}, t)
	return l
}

// firstCommandPhase is SDK Create from the pool then Run("echo hi"), timed
// until the output is back; the sandboxes are closed (their claims deleted)
// afterwards.
func firstCommandPhase(t *testing.T, sc *sdk.Client, ns string, n int, every time.Duration) Latency {
	l, closeAll := openAndEcho(t, n, every, func(ctx context.Context, _ int) (*sdk.Sandbox, error) {
		return sc.Create(ctx, ns, "pool")
	})
	closeAll()
	return l
}

// openAndEcho times, for n sandboxes every apart (0: all at once), open
// then "echo hi" until its output is back. closeAll closes the sandboxes
// opened (their context lasts until then, as for any SDK user).
func openAndEcho(t *testing.T, n int, every time.Duration, open func(ctx context.Context, i int) (*sdk.Sandbox, error)) (_ Latency, closeAll func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	sbs := make([]*sdk.Sandbox, n)
	l := schedule(n, every, func(i int) (time.Duration, error) {
		began := time.Now()
		sb, err := open(ctx, i)
		if err != nil {
			return 0, err
		}
		sbs[i] = sb
		err = echoHi(ctx, sb)
		return time.Since(began), err
	}, t)
	return l, func() {
		defer cancel()
		parallel(n, func(i int) error {
			if sbs[i] == nil {
				return nil
			}
			return sbs[i].Close(context.Background())
		}, t)
	}
}

// echoHi runs "echo hi" on sb: an error unless it exits 0 and prints hi.
func echoHi(ctx context.Context, sb *sdk.Sandbox) error {
	res, err := sb.Run(ctx, "echo hi")
	if err == nil && (res.ExitCode != 0 || res.Stdout != "hi\n") {
		err = fmt.Errorf("echo hi: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	return err
}

// commandPhase runs "echo hi" 100 times one after the other on the first
// sandbox, then from `clients` goroutines spread over sbs for d.
func commandPhase(t *testing.T, sbs []*sdk.Sandbox, clients int, d time.Duration) Commands {
	ctx := context.Background()
	run := func(sb *sdk.Sandbox) (float64, error) {
		began := time.Now()
		res, err := sb.Run(ctx, "echo hi")
		if err == nil && res.Stdout != "hi\n" {
			err = fmt.Errorf("echo hi: exit %d, stdout %q", res.ExitCode, res.Stdout)
		}
		return ms(time.Since(began)), err
	}
	out := Commands{Clients: clients, Sandboxes: len(sbs)}
	var seq []float64
	for range 100 {
		v, err := run(sbs[0])
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, v)
	}
	sort.Float64s(seq)
	out.SequentialP50Ms, out.SequentialP99Ms = quantile(seq, 0.5), quantile(seq, 0.99)

	cpu := cpuWithExtra()
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range clients {
		wg.Go(func() {
			var mine []float64
			errs := 0
			for time.Now().Before(deadline) {
				v, err := run(sbs[i%len(sbs)])
				if err != nil {
					if errs == 0 {
						t.Logf("client %d: %v", i, err)
					}
					errs++
					continue
				}
				mine = append(mine, v)
			}
			mu.Lock()
			lat = append(lat, mine...)
			out.Errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	out.CPUSeconds = cpuDiff(cpuWithExtra(), cpu)
	sort.Float64s(lat)
	out.Seconds, out.Done = round2(elapsed), len(lat)
	out.PerSecond = round2(float64(len(lat)) / elapsed)
	out.P50Ms, out.P99Ms = quantile(lat, 0.5), quantile(lat, 0.99)
	return out
}

// cpuWithExtra is cpuByProcess with the router and the floor's runtimes.
func cpuWithExtra() map[string]float64 {
	out := cpuByProcess(clusterDirOf)
	if routerPID > 0 {
		out["sandbox-router"] = procCPU(routerPID)
	}
	for _, pid := range floorPIDs {
		out["sandbox-runtime (floor)"] += procCPU(pid)
	}
	return out
}

func logJSON(t *testing.T, name string, v any) {
	if b, err := json.Marshal(v); err == nil {
		t.Logf("%s: %s", name, b)
	}
}
