package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/e2b"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// E2B is the JSON document TestBenchE2B prints: the unmodified e2b SDK
// (tests/e2b/bench.mjs, Node.js) against the router's E2B front door on the
// local cluster with the stand-in kubelet, each figure next to the floor it
// is compared with, measured in the same run.
type E2B struct {
	SDKVersion      string  `json:"e2b_sdk_version"`
	Pool            int     `json:"pool"`
	Nodes           int     `json:"nodes"`
	PoolFillSeconds float64 `json:"pool_fill_seconds"`
	// ClaimReady is the floor: a SandboxClaim on the same pool created with
	// a plain client until the bench's watch sees it Ready, "paced" and
	// "burst" (all at once), as the data-plane bench measures it.
	ClaimReady map[string]Latency `json:"claim_ready_floor"`
	// FirstCommand is Sandbox.create(pool) then commands.run('echo hi')
	// until its output is back, "paced" and "burst"; ratios to ClaimReady
	// of the same pacing.
	FirstCommand map[string]Latency `json:"e2b_create_to_first_command"`
	// Echo is commands.run('echo hi') on one sandbox, one after another:
	// "e2b" (envd's process.Process/Start stream through the router) and
	// "legacy_execute" (upstream's POST /execute through the same router,
	// on a sandbox of the same pool), both from Node.js.
	Echo map[string]Sequential `json:"echo_hi"`
	// EchoRatioP50 and EchoRatioP99 are e2b's over legacy_execute's.
	EchoRatioP50 float64 `json:"echo_hi_e2b_to_legacy_p50_ratio"`
	EchoRatioP99 float64 `json:"echo_hi_e2b_to_legacy_p99_ratio"`
}

// Sequential summarises calls made one after another.
type Sequential struct {
	Calls  int     `json:"calls"`
	Errors int     `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// benchOut is what bench.mjs prints.
type benchOut struct {
	Seconds    float64   `json:"seconds"`
	Latencies  []float64 `json:"latencies_ms"`
	Errors     []string  `json:"errors"`
	KillErrors []string  `json:"kill_errors"`
}

// TestBenchE2B measures the E2B front door with the e2b SDK. It runs only
// with AGENT_SANDBOX_BENCH=1 (make bench) and Node.js (it skips, saying so,
// without). BENCH_E2B_BURST sets the sandboxes created at once (50; the
// pool has as many members), BENCH_E2B_PACED the paced ones (20, one every
// 200 ms), BENCH_E2B_CALLS the sequential echo calls (200),
// BENCH_E2B_OUT a file for the JSON.
func TestBenchE2B(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	if err := e2b.Available(); err != nil {
		t.Skipf("the E2B bench needs Node.js: %v", err)
	}
	burst := envInt(t, "BENCH_E2B_BURST", 50)
	paced := min(envInt(t, "BENCH_E2B_PACED", 20), burst)
	calls := envInt(t, "BENCH_E2B_CALLS", 200)
	res := E2B{SDKVersion: e2b.Version, Pool: burst, Nodes: 3*burst/100 + 2,
		ClaimReady: map[string]Latency{}, FirstCommand: map[string]Latency{}, Echo: map[string]Sequential{}}

	ctx := context.Background()
	nodeDir, err := e2b.Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The router serves E2B as make run's does (--e2b-auth=none: any
	// non-empty key, sandboxes in --e2b-namespace).
	const ns = "e2b-bench"
	dc := startDataplaneCluster(t, "bench-e2b", res.Nodes, "--e2b", "--e2b-auth=none", "--e2b-namespace="+ns)
	env := e2b.Env{APIURL: dc.routerURL, SandboxURL: dc.routerURL, APIKey: "bench"}
	c, err := client.New(dc.local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	watched := newWatch(t, dc.local.Config, ns, &sandboxv1beta1.Sandbox{})
	claims := watchClaims(t, watched)
	startWatch(t, watched)

	start := time.Now()
	for _, o := range []client.Object{
		&extv1beta1.SandboxTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				RuntimeClassName: ptr.To("gvisor"),
				Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
			}}},
		},
		&extv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
			Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(burst)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "agent"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitPool(t, watched, ns, burst)
	res.PoolFillSeconds = round2(time.Since(start).Seconds())

	node := func(args ...string) benchOut {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		stdout, stderr, err := e2b.Run(rctx, nodeDir, env, "bench.mjs", args...)
		if err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
		var out benchOut
		if err := json.Unmarshal(lastLine(stdout), &out); err != nil {
			t.Fatalf("bench.mjs %v printed %q: %v", args, stdout, err)
		}
		for i, e := range out.Errors {
			if i < 3 {
				t.Logf("bench.mjs %v: %s", args, e)
			}
		}
		if len(out.KillErrors) > 0 {
			t.Errorf("bench.mjs %v: killing its sandboxes: %v", args, out.KillErrors)
		}
		return out
	}
	// Each phase starts on a full pool; the floor and the SDK alternate so
	// that a drift of the machine affects them alike.
	for _, p := range []struct {
		name  string
		n     int
		every time.Duration
	}{{"paced", paced, 200 * time.Millisecond}, {"burst", burst, 0}} {
		waitPool(t, watched, ns, burst)
		settle()
		f := claimReadyPhase(t, c, claims, ns, p.name, p.n, p.every)
		res.ClaimReady[p.name] = f
		logJSON(t, "claim_ready_"+p.name, f)

		waitPool(t, watched, ns, burst)
		settle()
		out := node("first-command", "pool", fmt.Sprint(p.n), fmt.Sprint(p.every.Milliseconds()))
		l := latencyOf(out.Latencies, p.n, out.Seconds)
		l.RatioP50, l.RatioP99 = round2(l.P50Ms/f.P50Ms), round2(l.P99Ms/f.P99Ms)
		res.FirstCommand[p.name] = l
		logJSON(t, "e2b_first_command_"+p.name, l)
	}

	// echo hi, one call after another: E2B, then the legacy protocol on a
	// sandbox claimed from the same pool through the Go SDK.
	waitPool(t, watched, ns, burst)
	settle()
	res.Echo["e2b"] = sequentialOf(node("commands", "pool", fmt.Sprint(calls)).Latencies, calls)
	logJSON(t, "echo_e2b", res.Echo["e2b"])
	direct := sdkClient(t, dc.local.Config)
	sb, err := direct.Create(ctx, ns, "pool")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	waitPool(t, watched, ns, burst)
	settle()
	res.Echo["legacy_execute"] = sequentialOf(node("execute", dc.routerURL, ns, sb.Name(), fmt.Sprint(calls)).Latencies, calls)
	logJSON(t, "echo_legacy_execute", res.Echo["legacy_execute"])
	if l := res.Echo["legacy_execute"]; l.P50Ms > 0 && l.P99Ms > 0 {
		res.EchoRatioP50 = round2(res.Echo["e2b"].P50Ms / l.P50Ms)
		res.EchoRatioP99 = round2(res.Echo["e2b"].P99Ms / l.P99Ms)
	}
	report(t, res, "BENCH_E2B_OUT")
}

// latencyOf summarises n attempts of which lat succeeded.
func latencyOf(lat []float64, n int, seconds float64) Latency {
	sorted := append([]float64(nil), lat...)
	sort.Float64s(sorted)
	l := Latency{Claims: n, Errors: n - len(sorted), Seconds: round2(seconds)}
	if len(sorted) > 0 {
		l.P50Ms, l.P99Ms, l.MaxMs = quantile(sorted, 0.5), quantile(sorted, 0.99), sorted[len(sorted)-1]
	}
	return l
}

func sequentialOf(lat []float64, n int) Sequential {
	l := latencyOf(lat, n, 0)
	return Sequential{Calls: n, Errors: l.Errors, P50Ms: l.P50Ms, P99Ms: l.P99Ms, MaxMs: l.MaxMs}
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) []byte {
	out = bytes.TrimSpace(out)
	return out[bytes.LastIndexByte(out, '\n')+1:]
}
