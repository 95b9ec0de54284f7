package bench

import (
	"flag"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestBenchClaims measures only the claims: the claims floor, then the
// controller serving the same claims, on a fresh cluster (TestBench
// measures them too, after the Sandbox phases). It runs with
// AGENT_SANDBOX_BENCH=1 and only when -run names it
// (BENCH_RUN=TestBenchClaims make bench); BENCH_CLAIMS sets the claims at
// once (default 100) and BENCH_OUT a file for the JSON (the warm_claims
// document). Between the claims floor and the controller it measures the
// claims floor with refill (measureClaimsFloorWithRefill,
// floor_with_refill; BENCH_REFILL_FLOOR=0 leaves it out), and once the
// controller is stopped both again in the reverse order (FloorsAround;
// BENCH_FLOORS_AFTER=0 leaves them out).
func TestBenchClaims(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "TestBenchClaims") {
		// make bench's TestBench measures the claims too.
		t.Skip("TestBench measures the claims; TestBenchClaims runs only when named (BENCH_RUN=TestBenchClaims)")
	}
	claims := envInt(t, "BENCH_CLAIMS", 100)
	local, c := startBenchCluster(t, "bench", 10)
	watched := newWatch(t, local.Config, "", &corev1.Pod{}, &sandboxv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{})
	startWatch(t, watched)

	// A first round, not counted, warms the new cluster up (TestBench's
	// earlier phases do it there): the API server's first writes of each
	// kind are slower.
	measureClaimsFloor(t, "claims_floor_warmup", local.Config, c, watched, claims, pacedClaims(t, claims))
	floor := measureClaimsFloor(t, "claims_floor", local.Config, c, watched, claims, pacedClaims(t, claims))
	t.Logf("claims floor done: p99 %.0f ms (bursts %v), paced p99 %.0f ms", floor.P99Ms, floor.P99sMs, floor.PacedP99Ms)
	refill := refillFloor(t, local.Config, c, watched, claims)
	ctrl := startController(t, local.Kubeconfig)
	defer ctrl.stop(t)
	settle()
	ns := mkNamespace(t, c, "claims")
	res := benchClaims(t, local.Config, c, watched, ctrl, ns, claims)
	res.withFloor(floor)
	res.withRefillFloor(refill)
	if os.Getenv("BENCH_FLOORS_AFTER") != "0" {
		// The same floors again, in the reverse order, once the controller
		// is stopped and its claims are gone (the cluster's nodes have room
		// for one measurement's Pods at a time): one floor measured twice in
		// a run differed by up to half, either way, so the ratios are also
		// given to the mean of its two measurements, around the controller's.
		ctrl.stop(t)
		dropNamespace(t, c, ns)
		settle()
		res.around(refillFloor(t, local.Config, c, watched, claims),
			measureClaimsFloor(t, "claims_floor_after", local.Config, c, watched, claims, pacedClaims(t, claims)))
	}
	report(t, res, "BENCH_OUT")
}

// FloorsAround are the floors measured again after the controller
// (TestBenchClaims: in the reverse order, so that each floor's two
// measurements sit as far before the controller's claims as after them),
// and the claims' ratios to the mean of each floor's two.
type FloorsAround struct {
	FloorAfter       *ClaimsFloor `json:"floor_after,omitempty"`
	FloorRefillAfter *ClaimsFloor `json:"floor_with_refill_after,omitempty"`
	// Ratios to the mean of the floor's measurements before and after.
	MedianP99RatioToFloors            float64 `json:"claim_ready_median_p99_ratio_to_floors_around,omitempty"`
	MedianPacedP99RatioToFloors       float64 `json:"paced_claim_ready_median_p99_ratio_to_floors_around,omitempty"`
	MedianP99RatioToRefillFloors      float64 `json:"claim_ready_median_p99_ratio_to_floors_with_refill_around,omitempty"`
	MedianPacedP99RatioToRefillFloors float64 `json:"paced_claim_ready_median_p99_ratio_to_floors_with_refill_around,omitempty"`
	// The mean of the floor with refill's two measurements over the
	// claims floor's: RefillFloorMedian*ToFloor, around the controller.
	RefillFloorsMedianP99ToFloors      float64 `json:"floors_with_refill_median_p99_ratio_to_floors_around,omitempty"`
	RefillFloorsMedianPacedP99ToFloors float64 `json:"floors_with_refill_paced_median_p99_ratio_to_floors_around,omitempty"`
}

// around sets the floors measured after the controller and the ratios to
// the mean of each floor's two measurements.
func (res *Claims) around(refill *ClaimsFloor, floor ClaimsFloor) {
	res.FloorAfter = &floor
	res.MedianP99RatioToFloors = ratio(res.MedianP99Ms, (res.Floor.MedianP99Ms+floor.MedianP99Ms)/2)
	res.MedianPacedP99RatioToFloors = ratio(res.MedianPacedP99Ms, (res.Floor.MedianPacedP99Ms+floor.MedianPacedP99Ms)/2)
	if refill == nil || res.FloorRefill == nil {
		return
	}
	res.FloorRefillAfter = refill
	res.MedianP99RatioToRefillFloors = ratio(res.MedianP99Ms, (res.FloorRefill.MedianP99Ms+refill.MedianP99Ms)/2)
	res.MedianPacedP99RatioToRefillFloors = ratio(res.MedianPacedP99Ms, (res.FloorRefill.MedianPacedP99Ms+refill.MedianPacedP99Ms)/2)
	res.RefillFloorsMedianP99ToFloors = ratio(res.FloorRefill.MedianP99Ms+refill.MedianP99Ms, res.Floor.MedianP99Ms+floor.MedianP99Ms)
	res.RefillFloorsMedianPacedP99ToFloors = ratio(res.FloorRefill.MedianPacedP99Ms+refill.MedianPacedP99Ms,
		res.Floor.MedianPacedP99Ms+floor.MedianPacedP99Ms)
}

// withFloor sets the claims' floor and their ratios to it.
func (res *Claims) withFloor(floor ClaimsFloor) {
	res.Floor = floor
	res.P99RatioToFloor = res.P99Ms / floor.P99Ms
	res.PacedP99RatioToFloor = res.PacedP99Ms / floor.PacedP99Ms
	res.MedianP99RatioToFloor = res.MedianP99Ms / floor.MedianP99Ms
	res.MedianPacedP99RatioToFloor = ratio(res.MedianPacedP99Ms, floor.MedianPacedP99Ms)
	res.ClaimsPerSecondToFloor = res.ClaimsPerSecond / floor.ClaimsPerSecond
}

// besideFloor sets the claims floor measured next to the n Running
// Sandboxes of the floor's own, and the claims' ratios to it.
func (res *Claims) besideFloor(floor ClaimsFloor) {
	res.FloorBeside = &floor
	res.P99RatioToFloorBeside = res.P99Ms / floor.P99Ms
	res.PacedP99RatioToFloorBeside = res.PacedP99Ms / floor.PacedP99Ms
	res.MedianP99RatioToFloorBeside = res.MedianP99Ms / floor.MedianP99Ms
	res.MedianPacedP99RatioToFloorBeside = ratio(res.MedianPacedP99Ms, floor.MedianPacedP99Ms)
}

// refillFloor is measureClaimsFloorWithRefill on an otherwise empty
// cluster, nil with BENCH_REFILL_FLOOR=0.
func refillFloor(t *testing.T, cfg *rest.Config, c client.Client, watched cache.Cache, claims int) *ClaimsFloor {
	if os.Getenv("BENCH_REFILL_FLOOR") == "0" {
		return nil
	}
	f := measureClaimsFloorWithRefill(t, "claims_floor_refill", cfg, c, watched, claims, pacedClaims(t, claims))
	t.Logf("claims floor with refill done: p99 %.0f ms (bursts %v), paced p99s %v ms", f.P99Ms, f.P99sMs, f.PacedP99sMs)
	return &f
}

// withRefillFloor sets the claims floor with refill, the claims' ratios to
// it, and its own to the claims floor (set first, by withFloor).
func (res *Claims) withRefillFloor(floor *ClaimsFloor) {
	if floor == nil {
		return
	}
	res.FloorRefill = floor
	res.MedianP99RatioToFloorRefill = ratio(res.MedianP99Ms, floor.MedianP99Ms)
	res.PacedP50RatioToFloorRefill = ratio(res.PacedP50Ms, floor.PacedP50Ms)
	res.MedianPacedP99RatioToFloorRefill = ratio(res.MedianPacedP99Ms, floor.MedianPacedP99Ms)
	res.RefillFloorMedianP99ToFloor = ratio(floor.MedianP99Ms, res.Floor.MedianP99Ms)
	res.RefillFloorMedianPacedP99ToFloor = ratio(floor.MedianPacedP99Ms, res.Floor.MedianPacedP99Ms)
}

func TestRefillFloorsOwnRatios(t *testing.T) {
	floor := func(bursts, paced float64) ClaimsFloor {
		return ClaimsFloor{Bursts: Bursts{MedianP99Ms: bursts, MedianPacedP99Ms: paced}}
	}
	res := Claims{Bursts: Bursts{MedianP99Ms: 1500, MedianPacedP99Ms: 60}}
	res.withFloor(floor(1000, 40))
	refill := floor(1200, 80)
	res.withRefillFloor(&refill)
	if res.RefillFloorMedianP99ToFloor != 1.2 || res.RefillFloorMedianPacedP99ToFloor != 2 {
		t.Errorf("floor with refill over the claims floor: bursts %v, paced %v; want 1.2, 2",
			res.RefillFloorMedianP99ToFloor, res.RefillFloorMedianPacedP99ToFloor)
	}
	if res.MedianPacedP99RatioToFloor != 1.5 || res.MedianPacedP99RatioToFloorRefill != 0.75 {
		t.Errorf("paced claims over the floors: %v and %v; want 1.5 and 0.75",
			res.MedianPacedP99RatioToFloor, res.MedianPacedP99RatioToFloorRefill)
	}
	// Around the controller: the means of each floor's two measurements.
	after := floor(1800, 40)
	res.around(&after, floor(1000, 20))
	if res.RefillFloorsMedianP99ToFloors != 1.5 || res.RefillFloorsMedianPacedP99ToFloors != 2 {
		t.Errorf("floors with refill over the claims floors, around: bursts %v, paced %v; want 1.5, 2",
			res.RefillFloorsMedianP99ToFloors, res.RefillFloorsMedianPacedP99ToFloors)
	}
	// Without a floor with refill (BENCH_REFILL_FLOOR=0), none is given.
	none := Claims{Bursts: Bursts{MedianP99Ms: 1500}}
	none.withFloor(floor(1000, 40))
	none.withRefillFloor(nil)
	none.around(nil, floor(1000, 40))
	if none.RefillFloorMedianPacedP99ToFloor != 0 || none.RefillFloorsMedianPacedP99ToFloors != 0 {
		t.Errorf("no floor with refill, yet its ratios are %v and %v",
			none.RefillFloorMedianPacedP99ToFloor, none.RefillFloorsMedianPacedP99ToFloors)
	}
}
