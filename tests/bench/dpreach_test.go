package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

// Reach is the first contact with Sandboxes nobody has reached before,
// measured alone (no claim made, nothing else running): the SDK's Open of
// a Ready Sandbox made for the purpose (not a warm-pool member: the router
// does not route to an unclaimed one), by the SDK's spans. Health is its
// connect and first round trip (to the stand-in kubelet's runtime: by the
// SDK through the API server's port-forward; by the router as its
// --transport says, kwok's straight to the runtime by default) and Run its first command. A claim's first command pays both
// on top of its claim's Ready whatever the controller does, so the first
// command's p50_ratio_to_reach_floor compares it with ClaimReady + Health
// + Run.
type Reach struct {
	Sandboxes int     `json:"sandboxes"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	Health    Step    `json:"health"`
	Run       Step    `json:"run"`
}

// reachPhase makes n Sandboxes like the pool's members, waits until they
// are Ready and the cluster has settled, then opens them with sc, every
// apart (0: all at once), runs "echo hi" on each and disconnects. The
// Sandboxes are deleted afterwards.
func reachPhase(t *testing.T, c client.Client, sc *sdk.Client, steps *sdkSteps, watched cache.Cache, ns, key string, n int, every time.Duration) Reach {
	t.Helper()
	names := make([]string, n)
	parallel(n, func(i int) error {
		sb := benchSandbox(ns, i)
		sb.Name = fmt.Sprintf("reach-%s-%d", strings.ReplaceAll(key, "_", "-"), i)
		names[i] = sb.Name
		return c.Create(context.Background(), sb)
	}, t)
	defer parallel(n, func(i int) error {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]}}
		return client.IgnoreNotFound(c.Delete(context.Background(), sb))
	}, t)
	waitReady(t, watched, ns, names)
	settle()
	steps.since()
	l, closeAll := openAndEcho(t, n, every, func(ctx context.Context, i int) (*sdk.Sandbox, error) {
		return sc.Open(ctx, ns, names[i])
	})
	st := steps.since()
	closeAll() // Open's Sandboxes: only disconnects
	return Reach{Sandboxes: n, Errors: l.Errors, Seconds: l.Seconds, Health: st["sandbox.health"], Run: st["sandbox.run"]}
}

// waitReady waits until the watch shows every Sandbox of names in ns Ready.
func waitReady(t *testing.T, watched cache.Cache, ns string, names []string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		ready := 0
		for _, name := range names {
			var sb sandboxv1beta1.Sandbox
			if err := watched.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sb); err != nil {
				continue
			}
			if meta.IsStatusConditionTrue(sb.Status.Conditions, sandboxv1beta1.ConditionReady) {
				ready++
			}
		}
		if ready == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reach: %d of %d Sandboxes Ready after 5 minutes", ready, len(names))
		}
	}
}

// withReach adds to l (a first command of pacing p) its ratios to the
// reach floor: the claim-Ready floor f plus r's first contact and first
// command, p50 to p50 and p99 to p99 (a sum of p99s is above the p99 of
// the sums, so the p99 ratio errs in the controller's favour).
func withReach(l Latency, f Latency, r Reach) (Latency, Latency) {
	floor := Latency{Claims: f.Claims, PaceMs: f.PaceMs, P50Ms: round2(f.P50Ms + r.Health.P50Ms + r.Run.P50Ms),
		P99Ms: round2(f.P99Ms + r.Health.P99Ms + r.Run.P99Ms)}
	if floor.P50Ms > 0 && floor.P99Ms > 0 {
		l.RatioP50ToReachFloor, l.RatioP99ToReachFloor = round2(l.P50Ms/floor.P50Ms), round2(l.P99Ms/floor.P99Ms)
	}
	return l, floor
}
