package bench

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Claims is the warm-claim scenario: a Ready pool of M, then M claims
// created at once.
type Claims struct {
	Claims int `json:"claims"`
	// PoolFillSeconds is the time from creating the pool to M Ready members.
	PoolFillSeconds float64 `json:"pool_fill_seconds"`
	// Latencies from just before each claim's create request to the bench's
	// watch seeing the claim Ready.
	P50Ms float64 `json:"claim_ready_p50_ms"`
	P99Ms float64 `json:"claim_ready_p99_ms"`
	MaxMs float64 `json:"claim_ready_max_ms"`
	// The same, from the bench's watch first seeing each claim (it exists
	// in the API server) to seeing it Ready: the controller's share,
	// without the time the create request itself queued.
	SeenP50Ms float64 `json:"claim_seen_to_ready_p50_ms"`
	SeenP99Ms float64 `json:"claim_seen_to_ready_p99_ms"`
	// Bursts are every burst's p99 (the first is P99Ms; the other figures
	// here are the first burst's) and their median.
	Bursts
	// CreateP99Ms is the p99 duration of the claims' create requests.
	CreateP99Ms float64 `json:"claim_create_request_p99_ms"`
	// AllReadySeconds is the time until every claim was Ready, and
	// ClaimsPerSecond the claims served per second over it: the rate the
	// controller sustains while all of them wait.
	AllReadySeconds float64 `json:"all_claims_ready_seconds"`
	ClaimsPerSecond float64 `json:"claims_per_second"`
	// BurstCPUSeconds is what each process used until every claim was
	// Ready (the floor's CPUSeconds' counterpart; ClaimPhase's runs on
	// until the pool is full again).
	BurstCPUSeconds map[string]float64 `json:"burst_cpu_seconds,omitempty"`
	// BurstApplies and BurstRequests are the controller's
	// agent_sandbox_apply_total (by action and kind) and requests (by
	// verb) until every claim was Ready: what competed with the claims'
	// own writes, where claim_phase adds the refill after them.
	BurstApplies  map[string]int64 `json:"burst_controller_apply_total,omitempty"`
	BurstRequests map[string]int64 `json:"burst_controller_requests_by_verb,omitempty"`
	// BurstAPIRequests is what the API server served in the burst, from
	// every client, by verb and resource (apiServerCounts).
	BurstAPIRequests map[string]int64 `json:"burst_apiserver_requests,omitempty"`
	// Timeline and PacedTimeline are where each claim's time went, in
	// the burst and paced.
	Timeline      ClaimTimeline `json:"timeline"`
	PacedTimeline ClaimTimeline `json:"paced_timeline"`
	// Warm and Cold count how the claims were served.
	Warm int `json:"warm"`
	Cold int `json:"cold"`
	// RefillSeconds is the time from the first claim to the pool being back
	// at M Ready members.
	RefillSeconds float64 `json:"pool_refill_seconds"`
	// ClaimPathRequestsPerClaim counts the writes the claim controller made
	// per claim (adoption patch, status, annotation), from the controller's
	// agent_sandbox_apply_total; ClaimPhase is everything the controller
	// sent while the claims were served and the pool refilled.
	ClaimPathRequestsPerClaim float64 `json:"claim_path_requests_per_claim"`
	ClaimPhase                Phase   `json:"claim_phase"`
	// ClaimPathApplies is the controller's agent_sandbox_apply_total over
	// the burst and the refill, by action and kind.
	ClaimPathApplies map[string]int64 `json:"claim_phase_applies,omitempty"`
	// Paced is the same pool serving claims one at a time (each created
	// when the previous one is Ready): the latency of a claim on a cluster
	// that is not saturated by the burst.
	PacedClaims int `json:"paced_claims"`
	PacedUse
	// PacedPhase is what the controller did over the paced claims (with
	// its CPU profile, paced_claims).
	PacedPhase Phase   `json:"paced_phase"`
	PacedP50Ms float64 `json:"paced_claim_ready_p50_ms"`
	PacedP99Ms float64 `json:"paced_claim_ready_p99_ms"`
	// Floor is the same claims served by a client with no controller
	// (measureClaimsFloor), measured before the controller starts on a
	// cluster with nothing else in it; the ratios are of the p99 latencies
	// above to the floor's.
	Floor                ClaimsFloor `json:"floor"`
	P99RatioToFloor      float64     `json:"claim_ready_p99_ratio_to_floor"`
	PacedP99RatioToFloor float64     `json:"paced_claim_ready_p99_ratio_to_floor"`
	// MedianP99RatioToFloor is MedianP99Ms over the floor's, and
	// MedianPacedP99RatioToFloor MedianPacedP99Ms over the floor's.
	MedianP99RatioToFloor      float64 `json:"claim_ready_median_p99_ratio_to_floor"`
	MedianPacedP99RatioToFloor float64 `json:"paced_claim_ready_median_p99_ratio_to_floor,omitempty"`
	// ClaimsPerSecondToFloor is ClaimsPerSecond over the floor's.
	ClaimsPerSecondToFloor float64 `json:"claims_per_second_ratio_to_floor"`
	// FloorBeside is the claims floor measured next to as many Running
	// Sandboxes as the controller's claims run beside (TestBench: the
	// floor's own n, before they are deleted), and the ratios to it; Floor
	// is measured on a cluster with nothing else in it.
	FloorBeside                      *ClaimsFloor `json:"floor_next_to_n,omitempty"`
	P99RatioToFloorBeside            float64      `json:"claim_ready_p99_ratio_to_floor_next_to_n,omitempty"`
	MedianP99RatioToFloorBeside      float64      `json:"claim_ready_median_p99_ratio_to_floor_next_to_n,omitempty"`
	MedianPacedP99RatioToFloorBeside float64      `json:"paced_claim_ready_median_p99_ratio_to_floor_next_to_n,omitempty"`
	PacedP99RatioToFloorBeside       float64      `json:"paced_claim_ready_p99_ratio_to_floor_next_to_n,omitempty"`
	// FloorRefill is the claims floor with refill
	// (measureClaimsFloorWithRefill: the same client also relabels the
	// taken member's Pod, records the SandboxAdopted Event and makes a new
	// member in its place, as the contract has a warm pool do), and the
	// ratios to it: what the contract costs beyond the claims floor's
	// three writes, with no controller.
	FloorRefill                      *ClaimsFloor `json:"floor_with_refill,omitempty"`
	MedianP99RatioToFloorRefill      float64      `json:"claim_ready_median_p99_ratio_to_floor_with_refill,omitempty"`
	PacedP50RatioToFloorRefill       float64      `json:"paced_claim_ready_p50_ratio_to_floor_with_refill,omitempty"`
	MedianPacedP99RatioToFloorRefill float64      `json:"paced_claim_ready_median_p99_ratio_to_floor_with_refill,omitempty"`
	// RefillFloorMedianP99ToFloor and RefillFloorMedianPacedP99ToFloor
	// are the floor with refill's median p99s, of the bursts and of the
	// paced series, over the claims floor's: what the contract's writes
	// beyond a claim's own three cost a client with no controller, in the
	// same run. Any implementation of the contract makes those writes, so
	// this is the part of the ratios to the claims floor that is not the
	// controller's to remove.
	RefillFloorMedianP99ToFloor      float64 `json:"floor_with_refill_median_p99_ratio_to_floor,omitempty"`
	RefillFloorMedianPacedP99ToFloor float64 `json:"floor_with_refill_paced_median_p99_ratio_to_floor,omitempty"`
	FloorsAround
	// Sizes are the objects the claims' writes change (a member, taken,
	// and its claim), read from the API server.
	Sizes ObjectSizes `json:"object_sizes"`
}

func benchClaims(t *testing.T, cfg *rest.Config, c client.Client, watched cache.Cache, ctrl *controller, ns string, m int) Claims {
	ctx := context.Background()
	res := Claims{Claims: m}
	tmpl, pool := claimsTemplate(ns), claimsPool(ns, m)
	// The pool is full when m Ready Sandboxes carry its label (counted
	// from the watch; the pool's own status may lag while claims are
	// being served).
	poolReady := func() bool {
		var list sandboxv1beta1.SandboxList
		if err := watched.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false
		}
		n := 0
		for _, sb := range list.Items {
			if _, member := sb.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; !member || sb.DeletionTimestamp != nil {
				continue
			}
			for _, c := range sb.Status.Conditions {
				if c.Type == sandboxv1beta1.ConditionReady && c.Status == metav1.ConditionTrue {
					n++
				}
			}
		}
		return n == m
	}

	start := time.Now()
	for _, o := range []client.Object{tmpl, pool} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for !poolReady() {
		time.Sleep(20 * time.Millisecond)
	}
	res.PoolFillSeconds = time.Since(start).Seconds()
	var members sandboxv1beta1.SandboxList
	if err := watched.List(ctx, &members, client.InNamespace(ns)); err != nil || len(members.Items) == 0 {
		t.Fatalf("listing the pool's members: %v (%d)", err, len(members.Items))
	}
	res.Sizes.member(t, c, ns, members.Items[0].Name)
	settle()

	clock, stop := startClaimClock(t, watched, ns)
	clock.gc = ctrl.gcWindows
	defer stop()
	clock.apiserver = cfg

	appliesBefore, requestsBefore := ctrl.series(t, "agent_sandbox_apply_total"), ctrl.requestsByVerb(t)
	pr := ctrl.begin(t, "claim_phase")
	burst := clock.measure(t)
	start = time.Now()
	clock.burst(t, c, "claim", m)
	res.AllReadySeconds = time.Since(start).Seconds()
	res.ClaimsPerSecond = float64(m) / res.AllReadySeconds
	// The burst's CPU and requests are read as it ends, before the API
	// server's profile (up to a chunk longer) and the sizes are taken.
	res.BurstApplies = diff(ctrl.series(t, "agent_sandbox_apply_total"), appliesBefore)
	res.BurstRequests = diff(ctrl.requestsByVerb(t), requestsBefore)
	res.BurstCPUSeconds, res.BurstAPIRequests = burst.end(t, "claim_burst")
	res.Sizes.claimed(t, c, ns, "claim-0")
	for !poolReady() {
		time.Sleep(20 * time.Millisecond)
	}
	res.RefillSeconds = time.Since(start).Seconds()
	res.ClaimPhase.Seconds = res.RefillSeconds
	res.ClaimPhase.CPUSeconds = cpuDiff(cpuByProcess(clusterDirOf), burst.cpu)
	settle()
	pr.end(t, &res.ClaimPhase, m)
	applies := diff(ctrl.series(t, "agent_sandbox_apply_total"), appliesBefore)
	var claimPath int64
	for labels, v := range applies {
		switch labels {
		case `action="configured",kind="Sandbox"`, `action="configured",kind="SandboxClaimStatus"`,
			`action="configured",kind="SandboxClaim"`, `action="created",kind="SandboxClaim"`:
			claimPath += v
		}
	}
	res.ClaimPathRequestsPerClaim = float64(claimPath) / float64(m)
	res.ClaimPathApplies = applies

	lat, seenLat, createLat := clock.latencies("claim", m)
	res.P50Ms, res.P99Ms, res.MaxMs = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	res.SeenP50Ms, res.SeenP99Ms = quantile(seenLat, 0.50), quantile(seenLat, 0.99)
	res.CreateP99Ms = quantile(createLat, 0.99)

	// Paced claims, once the pool is full again.
	settle()
	res.PacedClaims = pacedClaims(t, m)
	pr = ctrl.begin(t, "paced_claims")
	tr := startControllerTrace(t, ctrl.pprof, "paced_claims", pacedTraceSeconds(res.PacedClaims))
	paced, use := clock.pacedMeasured(t, c, "paced", res.PacedClaims, "claim_paced")
	tr.wait(t)
	res.PacedUse = use
	pr.end(t, &res.PacedPhase, res.PacedClaims)
	res.PacedP50Ms, res.PacedP99Ms = quantile(paced, 0.5), quantile(paced, 0.99)
	res.Timeline, res.PacedTimeline = clock.timeline("claim", m), clock.timeline("paced", res.PacedClaims)
	res.Bursts = clock.moreBursts(t, c, m, res.PacedClaims, claimBursts(t), res.P99Ms, res.PacedP99Ms, burst.ownDiff, poolReady)

	var list sandboxv1beta1.SandboxList
	if err := watched.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Items {
		switch sb.Labels[sandboxv1beta1.LabelClaimUID] {
		case "":
		default:
			if sb.Labels[sandboxv1beta1.LabelLaunchType] == sandboxv1beta1.LaunchTypeWarm {
				res.Warm++
			} else {
				res.Cold++
			}
		}
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// claimsTemplate and claimsPool are the template and the pool of m members
// the claims are served from.
func claimsTemplate(ns string) *extv1beta1.SandboxTemplate {
	return &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
			RuntimeClassName: ptr.To("gvisor"),
			Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		}}},
	}
}

func claimsPool(ns string, m int) *extv1beta1.SandboxWarmPool {
	return &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(m)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "agent"}},
	}
}

// pacedClaims is how many claims each claims run creates one at a time
// after its burst of claims (BENCH_PACED_CLAIMS, 100 by default, at most
// claims): enough for their p99 not to be a single claim's time.
func pacedClaims(t *testing.T, claims int) int {
	return min(envInt(t, "BENCH_PACED_CLAIMS", 100), claims)
}
