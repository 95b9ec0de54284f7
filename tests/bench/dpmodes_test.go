package bench

import (
	"context"
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
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// DataplaneModes is what TestBenchDataplaneModes prints: open -> first
// command in each of the SDK's connection modes, as a ratio to claim Ready
// (the floor), and `echo hi` on a claimed sandbox: sandboxd's Start (first
// stdout byte, and its exit) and Execute against the legacy POST /execute
// over the same kind of tunnel (the floor of that table).
type DataplaneModes struct {
	Claims int `json:"claims"`
	// ClaimReady is the floor: a SandboxClaim until it is seen Ready.
	ClaimReady Latency `json:"claim_ready_floor"`
	// FirstCommand is SDK Create then Run("echo hi"), per mode: "router"
	// (legacy protocol through bin/sandbox-router), "port_forward" (legacy,
	// pod tunnel to 8888) and "sandboxd" (pod tunnel to 8080 and 9090,
	// Execute).
	FirstCommand map[string]Latency `json:"open_to_first_command"`
	// EchoHi is one `echo hi` on an open sandbox, repeated: "legacy_execute"
	// (POST /execute through the pod tunnel, the floor), "legacy_router",
	// "sandboxd_start_first_stdout", "sandboxd_start_exit" and
	// "sandboxd_execute".
	EchoHi map[string]Latency `json:"echo_hi"`
}

// TestBenchDataplaneModes measures the data plane's connection modes on a
// local cluster with the stand-in kubelet (see DataplaneModes). It runs only
// with AGENT_SANDBOX_BENCH=1 (make bench BENCH_RUN=TestBenchDataplane);
// BENCH_DPM_CLAIMS sets the claims per mode (10, one every 200 ms, from a
// pool that size), BENCH_DPM_ECHO the `echo hi` repetitions (50),
// BENCH_DATAPLANE_MODES_OUT a file for the JSON.
func TestBenchDataplaneModes(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	n := envInt(t, "BENCH_DPM_CLAIMS", 10)
	echoes := envInt(t, "BENCH_DPM_ECHO", 50)
	res := DataplaneModes{Claims: n, FirstCommand: map[string]Latency{}, EchoHi: map[string]Latency{}}
	ctx := context.Background()
	dc := startDataplaneCluster(t, "bench-dpm", 2)
	c, err := client.New(dc.local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := mkNamespace(t, c, "dpmodes")
	watched := newWatch(t, dc.local.Config, ns, &sandboxv1beta1.Sandbox{})
	claims := watchClaims(t, watched)
	startWatch(t, watched)
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
			Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(n)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "agent"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	clients := map[string][]sdk.Option{"router": {sdk.WithRouter(dc.routerURL)}, "port_forward": nil, "sandboxd": {sdk.WithSandboxd()}}
	every := 200 * time.Millisecond
	waitPool(t, watched, ns, n)
	settle()
	res.ClaimReady = claimReadyPhase(t, c, claims, ns, "modes", n, every)
	for _, mode := range []string{"router", "port_forward", "sandboxd"} {
		sc := sdkClient(t, dc.local.Config, clients[mode]...)
		waitPool(t, watched, ns, n)
		settle()
		l := firstCommandPhase(t, sc, ns, n, every)
		l.RatioP50, l.RatioP99 = round2(l.P50Ms/res.ClaimReady.P50Ms), round2(l.P99Ms/res.ClaimReady.P99Ms)
		res.FirstCommand[mode] = l
		logJSON(t, "open_to_first_command_"+mode, l)
	}

	// echo hi on one claimed sandbox, each way.
	waitPool(t, watched, ns, n)
	open := func(opts ...sdk.Option) *sdk.Sandbox {
		sc := sdkClient(t, dc.local.Config, opts...)
		sb, err := sc.Create(ctx, ns, "pool")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Close(context.Background()) })
		return sb
	}
	legacy, viaSandboxd := open(), open(sdk.WithSandboxd())
	viaRouter, err := sdkClient(t, dc.local.Config, sdk.WithRouter(dc.routerURL)).Open(ctx, ns, legacy.ClaimName())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := viaSandboxd.ProcessService()
	if err != nil {
		t.Fatal(err)
	}
	run := func(sb *sdk.Sandbox) func() error {
		return func() error {
			r, err := sb.Run(ctx, "echo hi")
			if err == nil && r.Stdout != "hi\n" {
				err = fmt.Errorf("echo hi: %+v", r)
			}
			return err
		}
	}
	echo := &processpb.ProcessConfig{Command: []string{"echo", "hi"}}
	times := map[string][]float64{}
	record := func(key string, f func() error) {
		began := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		times[key] = append(times[key], ms(time.Since(began)))
	}
	for range echoes {
		record("legacy_execute", run(legacy))
		record("legacy_router", run(viaRouter))
		record("sandboxd_execute", func() error {
			r, err := pc.Execute(ctx, &processpb.ExecuteRequest{Config: echo})
			if err == nil && string(r.GetStdout()) != "hi\n" {
				err = fmt.Errorf("Execute echo hi: %v", r)
			}
			return err
		})
		began := time.Now()
		stream, err := pc.Start(ctx, &processpb.StartRequest{Config: echo})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("Start echo hi: %v", err)
			}
			if len(ev.GetStdout()) > 0 && len(times["sandboxd_start_first_stdout"]) < len(times["legacy_execute"]) {
				times["sandboxd_start_first_stdout"] = append(times["sandboxd_start_first_stdout"], ms(time.Since(began)))
			}
			if ev.GetExit() != nil {
				times["sandboxd_start_exit"] = append(times["sandboxd_start_exit"], ms(time.Since(began)))
				break
			}
		}
	}
	floor := summarize(times["legacy_execute"])
	for key, lat := range times {
		l := summarize(lat)
		l.RatioP50, l.RatioP99 = round2(l.P50Ms/floor.P50Ms), round2(l.P99Ms/floor.P99Ms)
		res.EchoHi[key] = l
	}
	report(t, res, "BENCH_DATAPLANE_MODES_OUT")
}

// summarize is the Latency of a set of durations in milliseconds.
func summarize(lat []float64) Latency {
	sort.Float64s(lat)
	l := Latency{Claims: len(lat)}
	if len(lat) > 0 {
		l.P50Ms, l.P99Ms, l.MaxMs = quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1]
	}
	return l
}
