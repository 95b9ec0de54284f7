package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
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
	// CreateP99Ms is the p99 duration of the claims' create requests.
	CreateP99Ms float64 `json:"claim_create_request_p99_ms"`
	// AllReadySeconds is the time until every claim was Ready.
	AllReadySeconds float64 `json:"all_claims_ready_seconds"`
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
	// Paced is the same pool serving claims one at a time (each created
	// when the previous one is Ready): the latency of a claim on a cluster
	// that is not saturated by the burst.
	PacedClaims int     `json:"paced_claims"`
	PacedP50Ms  float64 `json:"paced_claim_ready_p50_ms"`
	PacedP99Ms  float64 `json:"paced_claim_ready_p99_ms"`
}

func benchClaims(t *testing.T, c client.Client, watched cache.Cache, ctrl *controller, ns string, m int) Claims {
	ctx := context.Background()
	res := Claims{Claims: m}
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
			RuntimeClassName: ptr.To("gvisor"),
			Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		}}},
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(m)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "agent"}},
	}
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
	settle()

	// Watch for Ready claims; record when each is first seen Ready.
	var mu sync.Mutex
	sent := map[string]time.Time{}
	created := map[string]time.Duration{}
	seenAt := map[string]time.Time{}
	readyAt := map[string]time.Time{}
	informer, err := watched.GetInformer(ctx, &extv1beta1.SandboxClaim{})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(obj any) {
		cl, ok := obj.(*extv1beta1.SandboxClaim)
		if !ok || cl.Namespace != ns {
			return
		}
		mu.Lock()
		if _, ok := seenAt[cl.Name]; !ok {
			seenAt[cl.Name] = time.Now()
		}
		mu.Unlock()
		for _, cond := range cl.Status.Conditions {
			if cond.Type == extv1beta1.ConditionReady && cond.Status == metav1.ConditionTrue {
				mu.Lock()
				if _, ok := readyAt[cl.Name]; !ok {
					readyAt[cl.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()

	appliesBefore := ctrl.series(t, "agent_sandbox_apply_total")
	pr := ctrl.begin(t, "claim_phase")
	cpu := cpuByProcess(clusterDirOf)
	start = time.Now()
	// Every claim's request is ready to go before the first is sent, so
	// they reach the API server together.
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range m {
		name := fmt.Sprintf("claim-%d", i)
		wg.Go(func() {
			cl := &extv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
			}
			<-gate
			mu.Lock()
			sent[name] = time.Now()
			mu.Unlock()
			began := time.Now()
			if err := c.Create(ctx, cl); err != nil {
				t.Error(err)
			}
			mu.Lock()
			created[name] = time.Since(began)
			mu.Unlock()
		})
	}
	close(gate)
	wg.Wait()
	for {
		mu.Lock()
		n := len(readyAt)
		mu.Unlock()
		if n == m {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.AllReadySeconds = time.Since(start).Seconds()
	for !poolReady() {
		time.Sleep(20 * time.Millisecond)
	}
	res.RefillSeconds = time.Since(start).Seconds()
	res.ClaimPhase.Seconds = res.RefillSeconds
	res.ClaimPhase.CPUSeconds = cpuDiff(cpuByProcess(clusterDirOf), cpu)
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

	var lat, seenLat, createLat []float64
	for name, at := range readyAt {
		lat = append(lat, ms(at.Sub(sent[name])))
		seenLat = append(seenLat, ms(at.Sub(seenAt[name])))
		createLat = append(createLat, ms(created[name]))
	}
	for _, l := range [][]float64{lat, seenLat, createLat} {
		sort.Float64s(l)
	}
	res.P50Ms, res.P99Ms, res.MaxMs = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	res.SeenP50Ms, res.SeenP99Ms = quantile(seenLat, 0.50), quantile(seenLat, 0.99)
	res.CreateP99Ms = quantile(createLat, 0.99)

	// Paced claims, once the pool is full again.
	settle()
	res.PacedClaims = min(20, m)
	var paced []float64
	for i := range res.PacedClaims {
		name := fmt.Sprintf("paced-%d", i)
		cl := &extv1beta1.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
		}
		began := time.Now()
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		for {
			mu.Lock()
			at, ok := readyAt[name]
			mu.Unlock()
			if ok {
				paced = append(paced, ms(at.Sub(began)))
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Float64s(paced)
	res.PacedP50Ms, res.PacedP99Ms = quantile(paced, 0.5), quantile(paced, 0.99)

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
