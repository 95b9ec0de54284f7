package bench

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// Dataplane is the JSON document TestBenchDataplane prints: the data plane
// on the local cluster with the stand-in kubelet (one sandbox-runtime
// process per sandbox Pod, reached through the API server's
// pods/portforward), each figure with the floor it is compared with,
// measured in the same run.
type Dataplane struct {
	Pool            int     `json:"pool"`
	Nodes           int     `json:"nodes"`
	PoolFillSeconds float64 `json:"pool_fill_seconds"`
	// RouterTransport is the router's --transport: kwok (the default: to
	// the address kwok's PortForward gives a Pod's port, as a pod network
	// carries a router's connection) or port-forward (BENCH_ROUTER_ARGS).
	RouterTransport string `json:"router_transport"`
	// RouterAuth is the router's --auth (BENCH_DP_ROUTER_AUTH):
	// tokenreview (the default; the SDK then sends a ServiceAccount's token
	// whose Role may exec into the namespace's Sandboxes, and the router
	// reviews it and its access as for any tenant) or none.
	RouterAuth string `json:"router_auth"`
	// ClaimReady is the floor of claim -> first command: a SandboxClaim
	// created with a plain client until the bench's watch sees it Ready
	// (what the existing claim bench measures), with the same pacing.
	ClaimReady map[string]Latency `json:"claim_ready_floor"`
	// FirstCommand is SDK Create from the pool, then Run("echo hi"), until
	// its output is back: "paced_direct", "paced_router",
	// "paced_router_watch", and the same for "busy" and "burst". Direct is
	// the SDK's port-forward; router is bin/sandbox-router
	// (RouterTransport, --route-by-claim: Create asks the router for its
	// claim's Sandbox); router_watch the same router with the SDK waiting
	// for the claim's Ready by its watch (WithClaimReady). Ratios are to
	// ClaimReady of the same pacing.
	FirstCommand map[string]Latency `json:"claim_to_first_command"`
	// FirstCommandFloor is what claim -> first command cannot go below:
	// ClaimReady of the same pacing plus one "echo hi" on a runtime with
	// no Kubernetes (Commands["floor"], one at a time), p50 to p50 and p99
	// to p99. FirstCommand's *_ratio_to_first_command_floor are to it.
	FirstCommandFloor map[string]Latency `json:"first_command_floor"`
	// Reach is the first contact with a Sandbox nobody reached before,
	// measured alone by pacing and way ("paced_direct", ...; see Reach),
	// and ReachFloor ClaimReady of the same pacing plus that contact and
	// its first command: what claim -> first command cannot go below on
	// this cluster, where the SDK reaches a Pod by port-forward (the router
	// as RouterTransport says).
	// FirstCommand's *_ratio_to_reach_floor are to it.
	Reach      map[string]Reach   `json:"reach"`
	ReachFloor map[string]Latency `json:"first_command_reach_floor"`
	// Commands is "echo hi" on already claimed sandboxes: "floor" (the same
	// SDK calls against sandbox-runtime processes on 127.0.0.1, no
	// Kubernetes), "direct" and "router". Ratios are to "floor".
	Commands map[string]Commands `json:"commands"`
	// BurstRouter is the router's bursts over rounds, with their median.
	BurstRouter *BurstRounds `json:"burst_router_rounds,omitempty"`
}

// Latency summarises claim latencies of one phase.
type Latency struct {
	Claims int     `json:"claims"`
	Errors int     `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Seconds is the phase's duration, first request to last answer.
	Seconds float64 `json:"seconds"`
	// Ratios of P50Ms and P99Ms to the floor's.
	RatioP50 float64 `json:"p50_ratio_to_floor,omitempty"`
	RatioP99 float64 `json:"p99_ratio_to_floor,omitempty"`
	// Ratios to FirstCommandFloor (claim -> first command only).
	RatioP50ToFirstCommandFloor float64 `json:"p50_ratio_to_first_command_floor,omitempty"`
	RatioP99ToFirstCommandFloor float64 `json:"p99_ratio_to_first_command_floor,omitempty"`
	// Ratios to ReachFloor of the same key (claim -> first command only).
	RatioP50ToReachFloor float64 `json:"p50_ratio_to_reach_floor,omitempty"`
	RatioP99ToReachFloor float64 `json:"p99_ratio_to_reach_floor,omitempty"`
	// SDKSteps is where claim -> first command's time went, by the Go
	// SDK's spans (claim -> first command only).
	SDKSteps map[string]Step `json:"sdk_steps,omitempty"`
	// Timeline is the per-claim timeline of the claims (TestBenchDataplane:
	// the plain client's, and the SDK's with when the SDK saw each bound).
	Timeline    *ClaimTimeline `json:"claim_timeline,omitempty"`
	SDKTimeline *SDKTimeline   `json:"sdk_claim_timeline,omitempty"`
	// CPUSeconds (by process) and APIRequests (what the API server
	// served, by verb and resource, from every client) over the phase,
	// its claims' deletion included: what the floor's claims and the
	// SDK's cost the machine they share.
	CPUSeconds  map[string]float64 `json:"cpu_seconds,omitempty"`
	APIRequests map[string]int64   `json:"apiserver_requests,omitempty"`
	// PaceMs is the interval between the phase's claims (TestBenchDataplane;
	// absent: all at once, or a bench that does not say).
	PaceMs int64 `json:"pace_ms,omitempty"`
	// CPUShare is the share of the machine's CPU (all its cores) that the
	// processes in CPUSeconds used over the phase: near 1 the claims
	// queue for CPU, whatever sends them.
	CPUShare float64 `json:"cpu_share,omitempty"`
	// Router is what changed in the router's metrics over the phase
	// (sandbox_router_resolve_wait_seconds: requests that waited for the
	// router's cache to show their Sandbox routable).
	Router map[string]float64 `json:"router_metrics,omitempty"`
}

// Commands is one way of running commands: one at a time (latency), then
// Clients at once on Sandboxes sandboxes for Seconds (throughput).
type Commands struct {
	SequentialP50Ms float64 `json:"sequential_p50_ms"`
	SequentialP99Ms float64 `json:"sequential_p99_ms"`
	Clients         int     `json:"clients"`
	Sandboxes       int     `json:"sandboxes"`
	Seconds         float64 `json:"seconds"`
	Done            int     `json:"commands"`
	Errors          int     `json:"errors"`
	PerSecond       float64 `json:"commands_per_second"`
	P50Ms           float64 `json:"concurrent_p50_ms"`
	P99Ms           float64 `json:"concurrent_p99_ms"`
	// RatioP50 is SequentialP50Ms over the floor's; RatioPerSecond is the
	// floor's commands per second over these (both ≥ 1 when slower).
	RatioP50       float64 `json:"sequential_p50_ratio_to_floor,omitempty"`
	RatioPerSecond float64 `json:"time_per_command_ratio_to_floor,omitempty"`
	// CPUSeconds by process during the throughput run ("bench" hosts the
	// load generator and the stand-in kubelet).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
}

// TestBenchDataplane measures claim -> first command and commands per
// second, directly and through the router. It runs only with
// AGENT_SANDBOX_BENCH=1 (make bench). BENCH_DP_POOL sets the warm pool
// (100), BENCH_DP_PACED the paced claims (100: with fewer their p99 is
// the slowest one), spaced by BENCH_DP_PACE_MS on a quiet machine (1000:
// a claim rarely meets the previous one's refill) and again by
// BENCH_DP_BUSY_PACE_MS on a busy one (200, "busy": the floor's own claims
// and refills keep most of a 2-core machine's CPU busy; 0 skips it),
// BENCH_DP_BURST the claims at once (50, the figure, at most the
// pool; 100 is the whole pool, a harder case), BENCH_DP_BURSTS the
// rounds of bursts, floor and router (3; see BurstRounds),
// BENCH_DP_CLIENTS and BENCH_DP_SANDBOXES the throughput load (8 on 4),
// BENCH_DP_SECONDS its length (10), BENCH_DATAPLANE_OUT a file for the
// JSON.
func TestBenchDataplane(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	pool := envInt(t, "BENCH_DP_POOL", 100)
	paced := min(envInt(t, "BENCH_DP_PACED", 100), pool)
	burst := min(envInt(t, "BENCH_DP_BURST", 50), pool)
	clients := envInt(t, "BENCH_DP_CLIENTS", 8)
	sandboxes := min(envInt(t, "BENCH_DP_SANDBOXES", 4), pool)
	seconds := envInt(t, "BENCH_DP_SECONDS", 10)
	// Room for the pool, a burst of claimed members and their refill.
	res := Dataplane{Pool: pool, Nodes: 3*pool/100 + 2,
		ClaimReady: map[string]Latency{}, FirstCommand: map[string]Latency{}, FirstCommandFloor: map[string]Latency{},
		Commands: map[string]Commands{}, Reach: map[string]Reach{}, ReachFloor: map[string]Latency{}}
	steps := recordSDKSteps(t)

	ctx := context.Background()
	res.RouterAuth = dataplaneRouterAuth(t)
	dc := startDataplaneCluster(t, "bench-dp", res.Nodes, "--auth="+res.RouterAuth)
	local, runtimeBin, routerURL := dc.local, dc.runtimeBin, dc.routerURL
	res.RouterTransport = routerTransport

	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := mkNamespace(t, c, "dataplane")
	watched := newWatch(t, local.Config, ns, &sandboxv1beta1.Sandbox{})
	claims := watchClaims(t, watched)
	clock, stopClock := startClaimClock(t, watched, ns)
	defer stopClock()
	claims.clock = clock
	clock.apiserver = local.Config
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
			Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(pool)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "agent"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitPool(t, watched, ns, pool)
	res.PoolFillSeconds = round2(time.Since(start).Seconds())

	caller := benchCaller(t, local.Config, ns, res.RouterAuth)
	direct, viaRouter := sdkClient(t, local.Config), sdkClient(t, local.Config, append(caller, sdk.WithRouter(routerURL))...)
	// The same router, the SDK waiting for each claim's Ready with its
	// watch (WithClaimReady) rather than asking the router for the claim's
	// Sandbox: the route by claim's A/B, in the same run.
	viaRouterWatch := sdkClient(t, local.Config, append(caller, sdk.WithRouter(routerURL), sdk.WithClaimReady())...)
	pacings := dataplanePacings(t, paced, burst)
	// Each phase starts on a full pool; the floor and the SDK alternate so
	// that a drift of the machine affects them alike.
	phase := func(key string, n int, every time.Duration, floor bool, sc *sdk.Client) {
		waitPool(t, watched, ns, pool)
		settle()
		began := time.Now()
		use, routerBefore := clock.measure(t), routerSamples()
		var l Latency
		if floor {
			l = claimReadyPhase(t, c, claims, ns, key, n, every)
			tl := clock.timeline("floor-"+key, n)
			l.Timeline = &tl
		} else {
			steps.since()
			l = firstCommandPhase(t, sc, ns, n, every)
			l.SDKSteps = steps.since()
			l.SDKTimeline = clock.sdkTimeline(steps.lastSpans())
			pacing, _, _ := strings.Cut(key, "_")
			f := res.ClaimReady[pacing]
			l.RatioP50, l.RatioP99 = round2(l.P50Ms/f.P50Ms), round2(l.P99Ms/f.P99Ms)
		}
		l.CPUSeconds, l.APIRequests = use.end(t, "dp_"+key)
		l.PaceMs, l.CPUShare = every.Milliseconds(), cpuShare(l.CPUSeconds, time.Since(began))
		l.Router = routerDiff(routerBefore, routerSamples())
		if floor {
			res.ClaimReady[key] = l
		} else {
			res.FirstCommand[key] = l
		}
		logJSON(t, key, l)
	}
	for _, p := range pacings {
		phase(p.name, p.n, p.every, true, nil)
		phase(p.name+"_direct", p.n, p.every, false, direct)
		phase(p.name+"_router", p.n, p.every, false, viaRouter)
		phase(p.name+"_router_watch", p.n, p.every, false, viaRouterWatch)
	}
	bursts := burstRounds(t, func(key string, floor bool) {
		sc := viaRouter
		switch {
		case floor:
			sc = nil
		case strings.HasSuffix(key, "_router_watch"):
			sc = viaRouterWatch
		}
		phase(key, burst, 0, floor, sc)
	})

	// Throughput: the floor first, then the same load on claimed sandboxes.
	waitPool(t, watched, ns, pool)
	d := time.Duration(seconds) * time.Second
	floorSandboxes := floorRuntimes(t, runtimeBin, sandboxes)
	res.Commands["floor"] = commandPhase(t, floorSandboxes, clients, d)
	logJSON(t, "commands_floor", res.Commands["floor"])
	owned := make([]*sdk.Sandbox, sandboxes)
	routed := make([]*sdk.Sandbox, sandboxes)
	for i := range owned {
		if owned[i], err = direct.Create(ctx, ns, "pool"); err != nil {
			t.Fatal(err)
		}
		if routed[i], err = viaRouter.Open(ctx, ns, owned[i].ClaimName()); err != nil {
			t.Fatal(err)
		}
	}
	waitPool(t, watched, ns, pool)
	settle()
	for key, sbs := range map[string][]*sdk.Sandbox{"direct": owned, "router": routed} {
		cmd := commandPhase(t, sbs, clients, d)
		floor := res.Commands["floor"]
		cmd.RatioP50 = round2(cmd.SequentialP50Ms / floor.SequentialP50Ms)
		cmd.RatioPerSecond = round2(floor.PerSecond / cmd.PerSecond)
		res.Commands[key] = cmd
		logJSON(t, "commands_"+key, cmd)
	}
	// The first command's floor: claim Ready plus one command on a runtime
	// alone, both measured in this run.
	rtt := res.Commands["floor"]
	for key, l := range res.FirstCommand {
		pacing, _, _ := strings.Cut(key, "_")
		f := res.ClaimReady[pacing]
		floor := Latency{Claims: f.Claims, PaceMs: f.PaceMs, P50Ms: round2(f.P50Ms + rtt.SequentialP50Ms), P99Ms: round2(f.P99Ms + rtt.SequentialP99Ms)}
		res.FirstCommandFloor[pacing] = floor
		l.RatioP50ToFirstCommandFloor, l.RatioP99ToFirstCommandFloor = round2(l.P50Ms/floor.P50Ms), round2(l.P99Ms/floor.P99Ms)
		res.FirstCommand[key] = l
	}
	res.BurstRouter = summarizeBursts(&res, bursts)
	for _, sb := range append(routed, owned...) {
		if err := sb.Close(ctx); err != nil {
			t.Error(err)
		}
	}
	// First contact alone, with Sandboxes nobody reached, last.
	for _, p := range pacings {
		for way, sc := range map[string]*sdk.Client{"direct": direct, "router": viaRouter} {
			key := p.name + "_" + way
			waitPool(t, watched, ns, pool)
			r := reachPhase(t, c, sc, steps, watched, ns, key, p.n, p.every)
			res.Reach[key] = r
			logJSON(t, "reach_"+key, r)
			res.FirstCommand[key], res.ReachFloor[key] = withReach(res.FirstCommand[key], res.ClaimReady[p.name], r)
		}
	}
	report(t, res, "BENCH_DATAPLANE_OUT")
}

// envInt is the positive integer in $name, def when it is unset.
func envInt(t *testing.T, name string, def int) int { return envAtLeast(t, name, def, 1) }

// envAtLeast is the integer in $name, at least least, def when unset.
func envAtLeast(t *testing.T, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want an integer of at least %d", name, v, least)
	}
	return n
}

// waitPool waits until the pool has n Ready members (counted from the
// watch) whose runtimes the stand-in kubelet runs: kwok marks a Pod Ready
// at once, where a kubelet would wait for its container, so a member
// counts only once its runtime serves, as it would on a node.
func waitPool(t *testing.T, watched cache.Cache, ns string, n int) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list sandboxv1beta1.SandboxList
		if err := watched.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, sb := range list.Items {
			if _, member := sb.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; !member || sb.DeletionTimestamp != nil {
				continue
			}
			if benchStandIn != nil && !benchStandIn.Serving(standin.Key{Namespace: sb.Namespace, Name: sb.Name}) {
				continue
			}
			for _, c := range sb.Status.Conditions {
				if c.Type == sandboxv1beta1.ConditionReady && c.Status == metav1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool has %d of %d Ready members after 10 minutes", ready, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }

// pacing is how one series of claims is sent: n of them, every apart (0:
// all at once).
type pacing struct {
	name  string
	n     int
	every time.Duration
}

// dataplanePacings is TestBenchDataplane's series: "paced" (one claim
// every BENCH_DP_PACE_MS, 1000), "busy" (every BENCH_DP_BUSY_PACE_MS, 200;
// 0 leaves it out) and "burst" (all at once).
func dataplanePacings(t *testing.T, paced, burst int) []pacing {
	out := []pacing{{"paced", paced, time.Duration(envInt(t, "BENCH_DP_PACE_MS", 1000)) * time.Millisecond}}
	if busy := envAtLeast(t, "BENCH_DP_BUSY_PACE_MS", 200, 0); busy > 0 {
		out = append(out, pacing{"busy", paced, time.Duration(busy) * time.Millisecond})
	}
	return append(out, pacing{"burst", burst, 0})
}

// cpuShare is the share of this machine's CPU that cpu (seconds by
// process) was of d.
func cpuShare(cpu map[string]float64, d time.Duration) float64 {
	total := 0.0
	for _, s := range cpu {
		total += s
	}
	return round2(total / (d.Seconds() * float64(runtime.NumCPU())))
}
