package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// Resume is the JSON document TestBenchResume prints: the first request to
// a Suspended Sandbox that opted in to resume on connect, until its answer
// is back, through the router and by the SDK's port-forward, one at a time
// ("paced") and for every Sandbox at once ("burst"). The floor of each is a
// plain client setting the same Sandboxes Running (a merge patch) until the
// bench's watch sees them Ready, with the same pacing and in the same run:
// a resume on connect cannot be faster than a resume.
type Resume struct {
	Sandboxes int `json:"sandboxes"`
	Paced     int `json:"paced"`
	Nodes     int `json:"nodes"`
	// FirstRequest is keyed "paced_floor", "paced_router", "paced_direct",
	// "burst_floor", "burst_router", "burst_direct".
	FirstRequest map[string]Latency `json:"first_request_on_suspended"`
	// SuspendSeconds is how long suspending every Sandbox took before each
	// burst phase (Pods gone).
	SuspendSeconds []float64 `json:"suspend_seconds"`
}

// TestBenchResume measures resume on connect. It runs only with
// AGENT_SANDBOX_BENCH=1 (make bench). BENCH_RESUME_N sets the Sandboxes
// (100, all resumed at once in the burst phases), BENCH_RESUME_PACED how
// many are resumed one at a time (20), BENCH_RESUME_OUT a file for the JSON.
func TestBenchResume(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (AGENT_SANDBOX_BENCH=1)")
	}
	n := envInt(t, "BENCH_RESUME_N", 100)
	paced := min(envInt(t, "BENCH_RESUME_PACED", 20), n)
	res := Resume{Sandboxes: n, Paced: paced, Nodes: 3*n/100 + 2, FirstRequest: map[string]Latency{}}

	ctx := context.Background()
	dc := startDataplaneCluster(t, "bench-resume", res.Nodes)
	local, routerURL := dc.local, dc.routerURL

	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := mkNamespace(t, c, "resume")
	watched := newWatch(t, local.Config, ns, &corev1.Pod{})
	w := watchSandboxes(t, watched)
	startWatch(t, watched)

	parallel(n, func(i int) error {
		sb := benchSandbox(ns, i)
		sb.Spec.Service = nil
		sb.Annotations = map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}
		return c.Create(ctx, sb)
	}, t)
	name := func(i int) string { return fmt.Sprintf("sb-%d", i) }
	for i := range n {
		if _, err := w.waitReady(ctx, name(i), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	sc := sdkClient(t, local.Config)
	suspend := func(count int) {
		began := time.Now()
		parallel(count, func(i int) error {
			return patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Suspended"}}`)
		}, t)
		waitNoPods(t, watched, ns, count)
		res.SuspendSeconds = append(res.SuspendSeconds, round2(time.Since(began).Seconds()))
		settle()
	}
	floor := func(i int) (time.Duration, error) {
		began := time.Now()
		if err := patch(ctx, c, ns, i, `{"spec":{"operatingMode":"Running"}}`); err != nil {
			return 0, err
		}
		at, err := w.waitReady(ctx, name(i), began)
		return at.Sub(began), err
	}
	// The first request: the SDK's Open (which resumes by the API server)
	// and Run by port-forward, or through the router, where the request
	// itself resumes (Dial asks nothing of the API server; its health
	// check is the first request).
	first := func(open func(ctx context.Context, name string) (*sdk.Sandbox, error)) func(i int) (time.Duration, error) {
		return func(i int) (time.Duration, error) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			began := time.Now()
			sb, err := open(rctx, name(i))
			if err != nil {
				return 0, err
			}
			defer func() { _ = sb.Close(ctx) }()
			out, err := sb.Run(rctx, "echo hi")
			d := time.Since(began)
			if err == nil && (out.ExitCode != 0 || out.Stdout != "hi\n") {
				err = fmt.Errorf("echo hi: exit %d, stdout %q", out.ExitCode, out.Stdout)
			}
			return d, err
		}
	}
	direct := first(func(ctx context.Context, name string) (*sdk.Sandbox, error) { return sc.Open(ctx, ns, name) })
	routed := first(func(ctx context.Context, name string) (*sdk.Sandbox, error) {
		return sdk.Dial(ctx, ns, name, sdk.WithRouter(routerURL))
	})
	for _, p := range []struct {
		pacing string
		count  int
		every  time.Duration
	}{{"paced", paced, 0}, {"burst", n, 0}} {
		for _, way := range []struct {
			name string
			f    func(int) (time.Duration, error)
		}{{"floor", floor}, {"router", routed}, {"direct", direct}} {
			suspend(p.count)
			var l Latency
			if p.pacing == "paced" {
				l = sequential(p.count, way.f, t)
			} else {
				l = schedule(p.count, 0, way.f, t)
			}
			key := p.pacing + "_" + way.name
			if way.name != "floor" {
				f := res.FirstRequest[p.pacing+"_floor"]
				l.RatioP50, l.RatioP99 = round2(l.P50Ms/f.P50Ms), round2(l.P99Ms/f.P99Ms)
			}
			res.FirstRequest[key] = l
			logJSON(t, key, l)
			for i := range p.count {
				if _, err := w.waitReady(ctx, name(i), time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	report(t, res, "BENCH_RESUME_OUT")
}

// sequential runs f for 0..n-1 one after the other.
func sequential(n int, f func(int) (time.Duration, error), t *testing.T) Latency {
	l := Latency{Claims: n}
	began := time.Now()
	var lat []float64
	for i := range n {
		d, err := f(i)
		if err != nil {
			if l.Errors == 0 {
				t.Logf("sandbox %d: %v", i, err)
			}
			l.Errors++
			continue
		}
		lat = append(lat, ms(d))
	}
	l.Seconds = round2(time.Since(began).Seconds())
	if len(lat) > 0 {
		sort.Float64s(lat)
		l.P50Ms, l.P99Ms, l.MaxMs = quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1]
	}
	return l
}

// sandboxWatch tells when each Sandbox was first seen Ready after a time.
type sandboxWatch struct{ c cache.Cache }

func watchSandboxes(t *testing.T, c cache.Cache) *sandboxWatch {
	if _, err := c.GetInformer(context.Background(), &sandboxv1beta1.Sandbox{}); err != nil {
		t.Fatal(err)
	}
	return &sandboxWatch{c: c}
}

// waitReady polls the watch until the Sandbox is Running and Ready with a
// Ready transition after `after`, and returns when it saw that.
func (w *sandboxWatch) waitReady(ctx context.Context, name string, after time.Time) (time.Time, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var list sandboxv1beta1.SandboxList
		if err := w.c.List(ctx, &list); err != nil {
			return time.Time{}, err
		}
		for _, sb := range list.Items {
			if sb.Name != name || sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
				continue
			}
			cond := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionTrue && !cond.LastTransitionTime.Time.Before(after.Truncate(time.Second)) {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("sandbox %s not Ready after 5 minutes", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitNoPods waits until none of the first n Sandboxes has a Pod.
func waitNoPods(t *testing.T, c cache.Cache, ns string, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, p := range pods.Items {
			var i int
			if _, err := fmt.Sscanf(p.Name, "sb-%d", &i); err == nil && i < n {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Pods left 5 minutes after suspending", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
