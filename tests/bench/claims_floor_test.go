package bench

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// claimWorkers is the controller's default
// --sandbox-claim-concurrent-workers.
const claimWorkers = 50

// ClaimsFloor is the least work any controller of this API causes to serve
// claims from a Ready pool, done by one client with no controller running
// (measureClaimsFloor). The claims are created and timed as the controller's
// are (claimClock).
type ClaimsFloor struct {
	// From sending a claim's create to the bench's watch seeing it Ready:
	// claims created at once, then paced ones.
	P50Ms float64 `json:"claim_ready_p50_ms"`
	P99Ms float64 `json:"claim_ready_p99_ms"`
	// Bursts are every burst's p99 (the first is P99Ms) and their median.
	Bursts
	PacedP50Ms float64 `json:"paced_claim_ready_p50_ms"`
	PacedP99Ms float64 `json:"paced_claim_ready_p99_ms"`
	PacedUse
	AllReadySec     float64 `json:"all_claims_ready_seconds"`
	ClaimsPerSecond float64 `json:"claims_per_second"`
	// Timeline and PacedTimeline are where each claim's time went.
	Timeline      ClaimTimeline `json:"timeline"`
	PacedTimeline ClaimTimeline `json:"paced_timeline"`
	// Requests the floor's client sent per claim (the claims' creates are
	// the bench's, not counted), by HTTP method.
	RequestsPerClaim float64          `json:"requests_per_claim"`
	ByVerb           map[string]int64 `json:"requests_by_verb,omitempty"`
	// CPUSeconds is what each process used during the claims created at
	// once ("bench" is the floor's client and the bench together).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
	// APIRequests is what the API server served during the claims
	// created at once, from every client (apiServerCounts).
	APIRequests map[string]int64 `json:"apiserver_requests,omitempty"`
	// Sizes are the objects the claims' writes change, as sized for the
	// controller's (Claims.Sizes).
	Sizes ObjectSizes `json:"object_sizes"`
}

// measureClaimsFloor serves m claims created at once, then paced ones, from
// a pool whose Ready members exist already, with the least any controller
// must write: for each claim, as the bench's watch first sees it, it takes
// a member with the adoption the controller applies (render.Adoption: the
// claim as controller, the claim's labels, the pool's removed, the
// pod-name annotation; forced, guarded by the member's resourceVersion)
// then records the binding in the claim's annotations as upstream's
// contract requires (render.ClaimAnnotations: the member's name, when the
// claim was first seen and first Ready; guarded by the claim's
// resourceVersion) and applies the claim's status naming that member Ready
// (render.ClaimStatus, guarded by the resourceVersion the annotations
// left). Three requests per claim, claimWorkers at once as the
// controller's workers; no events, no refill. After the paced claims,
// claimBursts-1 more bursts, each with its paced series, are timed the
// same way, from members made for them beforehand. The members are made as the
// contract has a Ready member, not timed: applied by the controller's
// field manager, then the pod-name annotation and a Ready status
// (readyMember); they have no Pods (the floor never looks at them). The
// namespace is gone when it returns.
func measureClaimsFloor(t *testing.T, phase string, cfg *rest.Config, user client.Client, watched cache.Cache, m, paced int) ClaimsFloor {
	return claimsFloor(t, phase, cfg, user, watched, m, paced, false)
}

// measureClaimsFloorWithRefill is measureClaimsFloor with the rest of
// what upstream's contract writes for a claim served from a warm pool,
// by the same client (floorRefill): the taken member's Pod relabelled,
// the claim's SandboxAdopted Event, and a new member made in its place.
// The pool's m members are made that way first, untimed, with their
// Pods; members are then offered only as the refill makes them Ready, and
// each burst and paced series starts with the pool full again. Its
// requests per claim are the controller's counterpart of requests per
// claim and member.
func measureClaimsFloorWithRefill(t *testing.T, phase string, cfg *rest.Config, user client.Client, watched cache.Cache, m, paced int) ClaimsFloor {
	return claimsFloor(t, phase, cfg, user, watched, m, paced, true)
}

// claimsFloor is measureClaimsFloor, or with refill
// measureClaimsFloorWithRefill.
func claimsFloor(t *testing.T, phase string, cfg *rest.Config, user client.Client, watched cache.Cache, m, paced int, refill bool) ClaimsFloor {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bursts := claimBursts(t)
	c, counts := countingClient(t, cfg)
	ns := mkNamespace(t, c, "claims-floor")
	tmpl, pool := claimsTemplate(ns), claimsPool(ns, m)
	for _, o := range []client.Object{tmpl, pool} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var res ClaimsFloor
	if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: extv1beta1.GroupVersion.Group, Kind: "SandboxClaim"}); err != nil {
		t.Fatal(err)
	}
	var rf *floorRefill
	var free chan *sandboxv1beta1.Sandbox
	if refill {
		if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: eventsv1.GroupName, Kind: "Event"}, "v1"); err != nil {
			t.Fatal(err)
		}
		rf = startFloorRefill(ctx, t, c, watched, ns, pool, tmpl, bursts*(m+paced))
		rf.fill(m)
		free = rf.free
		res.Sizes.member(t, user, ns, rf.first)
	} else {
		free = readyMembers(ctx, t, c, pool, tmpl, bursts*(m+paced))
		res.Sizes.member(t, user, ns, memberName(pool, 0))
	}

	// Each claim the watch sees for the first time is a job.
	jobs := make(chan *extv1beta1.SandboxClaim, bursts*(m+paced))
	informer, err := watched.GetInformer(ctx, &extv1beta1.SandboxClaim{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if cl, ok := obj.(*extv1beta1.SandboxClaim); ok && cl.Namespace == ns {
			if rf != nil {
				rf.arrive()
			}
			jobs <- cl
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	serve := func(claim *extv1beta1.SandboxClaim) error {
		seen := time.Now()
		if rf != nil {
			defer rf.leave()
		}
		member := <-free
		adopt, err := render.Adoption(claim, tmpl, member, fieldManager)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, adopt, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return err
		}
		if rf != nil {
			if err := rf.taken(claim, member); err != nil {
				return err
			}
		}
		// The binding's annotations (the member's name, when the claim was
		// first seen and first Ready), guarded by the claim's
		// resourceVersion; the status is guarded by the one they leave.
		rv := claim.ResourceVersion
		if a := render.ClaimAnnotations(claim, member.Name, seen, time.Now()); a != nil {
			ac := a.Object.(*extac.SandboxClaimApplyConfiguration).WithResourceVersion(rv)
			if err := c.Apply(ctx, ac, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
				return err
			}
			rv = ptr.Deref(ac.ResourceVersion, "")
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		ready := member.DeepCopy()
		ready.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: sandboxv1beta1.ReasonDependenciesReady, Message: "Pod is Ready; Service Exists", LastTransitionTime: now}}
		status := render.ClaimStatus(render.ClaimStatusInputs{Claim: claim, SandboxName: member.Name, Sandbox: ready, Now: now})
		if err := c.Status().Apply(ctx, status.WithResourceVersion(rv), client.FieldOwner(statusManager), client.ForceOwnership); err != nil {
			return err
		}
		if rf != nil {
			rf.adopted(claim, member.Name)
		}
		return nil
	}
	for range claimWorkers {
		go func() {
			for {
				select {
				case claim := <-jobs:
					if err := serve(claim); err != nil {
						t.Errorf("claims floor: %v", err)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}

	clock, stop := startClaimClock(t, watched, ns)
	defer stop()
	clock.apiserver = cfg
	burst := clock.measure(t)
	counts.reset()
	start := time.Now()
	clock.burst(t, user, "claim", m)
	res.AllReadySec = time.Since(start).Seconds()
	res.ClaimsPerSecond = float64(m) / res.AllReadySec
	res.CPUSeconds, res.APIRequests = burst.end(t, phase)
	res.Sizes.claimed(t, user, ns, "claim-0")
	lat, _, _ := clock.latencies("claim", m)
	res.P50Ms, res.P99Ms = quantile(lat, 0.50), quantile(lat, 0.99)
	full := func() bool { return true }
	if rf != nil {
		full = func() bool { return rf.full(m) }
	}
	for !full() {
		time.Sleep(20 * time.Millisecond)
	}
	settle()
	lat, res.PacedUse = clock.pacedMeasured(t, user, "paced", paced, phase+"_paced")
	res.PacedP50Ms, res.PacedP99Ms = quantile(lat, 0.50), quantile(lat, 0.99)
	res.Timeline, res.PacedTimeline = clock.timeline("claim", m), clock.timeline("paced", paced)
	var b Baseline
	counts.fill(&b, m+paced) // before the other bursts
	res.Bursts = clock.moreBursts(t, user, m, paced, bursts, res.P99Ms, res.PacedP99Ms, burst.ownDiff, full)
	res.RequestsPerClaim, res.ByVerb = b.RequestsPerSandbox, b.ByVerb
	dropNamespace(t, c, ns)
	return res
}

// readyMembers makes n members of pool as the contract has a Ready member
// (readyMember), named as the pool names them, and offers them in that
// order.
func readyMembers(ctx context.Context, t *testing.T, c client.Client, pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, n int) chan *sandboxv1beta1.Sandbox {
	t.Helper()
	free := make(chan *sandboxv1beta1.Sandbox, n)
	for i := range n {
		ac, err := render.WarmPoolMember(render.WarmPoolInputs{Pool: pool, Template: tmpl}, memberName(pool, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, ac, client.FieldOwner(fieldManager)); err != nil {
			t.Fatal(err)
		}
		sb := &sandboxv1beta1.Sandbox{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: *ac.Name}, sb); err != nil {
			t.Fatal(err)
		}
		if err := readyMember(ctx, c, sb); err != nil {
			t.Fatal(err)
		}
		free <- sb
	}
	return free
}

// memberName is the name pool gives its i-th member.
func memberName(pool *extv1beta1.SandboxWarmPool, i int) string {
	return render.MemberName(pool.Name, render.SeededSuffixes(string(pool.UID))(i))
}

// readyMember gives member sb what the contract has on a Ready Sandbox,
// written as the controller writes it once its Pod is Ready: the pod-name
// annotation (applyPodName) and the status render.SandboxStatus makes for
// a Ready Pod with an IP on a node (the Ready, Suspended and PodScheduled
// conditions, nodeName, podIPs, selector, service, serviceFQDN), under the
// status manager. Without them the floor's takes would change objects
// half the size of a real member's (1.9 against 3.6 KB measured). sb is
// read again after.
func readyMember(ctx context.Context, c client.Client, sb *sandboxv1beta1.Sandbox) error {
	if err := applyPodName(ctx, c, sb, sb.Name); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name},
		Spec:       corev1.PodSpec{NodeName: "kwok-node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			}},
	}
	if _, err := applyStatus(ctx, c, sb, pod, true); err != nil {
		return err
	}
	return c.Get(ctx, client.ObjectKeyFromObject(sb), sb)
}
