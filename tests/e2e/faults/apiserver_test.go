package faults

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// readiness polls a controller's /readyz every 200ms and remembers whether
// it ever answered not-ready, and its last answer.
type readiness struct {
	mu           sync.Mutex
	sawNotReady  bool
	lastReady    bool
	notReadyFrom time.Time
	readyAgainAt time.Time
	stop         context.CancelFunc
}

func watchReadiness(probe string) *readiness {
	ctx, cancel := context.WithCancel(context.Background())
	r := &readiness{stop: cancel, lastReady: true}
	go func() {
		hc := &http.Client{Timeout: 3 * time.Second}
		for ctx.Err() == nil {
			ok := false
			if resp, err := hc.Get("http://" + probe + "/readyz"); err == nil {
				ok = resp.StatusCode == http.StatusOK
				_ = resp.Body.Close()
			}
			r.mu.Lock()
			if !ok && r.lastReady {
				r.sawNotReady, r.notReadyFrom = true, time.Now()
			}
			if ok && !r.lastReady {
				r.readyAgainAt = time.Now()
			}
			r.lastReady = ok
			r.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return r
}

func (r *readiness) state() (sawNotReady, ready bool, from, again time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sawNotReady, r.lastReady, r.notReadyFrom, r.readyAgainAt
}

// kubelet stands in for the kubelet of a real control plane: it starts
// again any component that exits (kube-scheduler and
// kube-controller-manager exit when they cannot renew their leader Lease
// during an API server outage), except kube-apiserver while an outage
// holds it down.
type kubelet struct {
	mu      sync.Mutex
	comps   []*cluster.Component
	held    string
	revived []string
	stop    context.CancelFunc
}

func startKubelet(t *testing.T) *kubelet {
	t.Helper()
	comps, err := cluster.Components(local)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{comps: comps, stop: cancel}
	go func() {
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			k.mu.Lock()
			for _, p := range k.comps {
				if p.Name == k.held || p.Alive() {
					continue
				}
				if err := p.Start(ctx); err == nil {
					k.revived = append(k.revived, p.Name)
				}
			}
			k.mu.Unlock()
		}
	}()
	t.Cleanup(cancel)
	return k
}

// takeRevived returns the components restarted since the last call.
func (k *kubelet) takeRevived() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.revived
	k.revived = nil
	return r
}

// outage stops kube-apiserver for d and starts it again; it returns when
// the API server is ready.
func (k *kubelet) outage(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	k.mu.Lock()
	var apiserver *cluster.Component
	for _, p := range k.comps {
		if p.Name == "kube-apiserver" {
			apiserver = p
		}
	}
	k.held = "kube-apiserver"
	k.mu.Unlock()
	if apiserver == nil {
		t.Fatal("no kube-apiserver among the cluster's components")
	}
	start := time.Now()
	if err := apiserver.Stop(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	err := apiserver.Start(context.Background())
	k.mu.Lock()
	k.held = ""
	k.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// setModes sets operatingMode on every named Sandbox with 16 writers,
// retrying conflicts and an absent API server.
func setModes(c client.Client, ns string, names []string, mode sandboxv1beta1.SandboxOperatingMode) error {
	return parallelErr(16, len(names), func(i int) error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				sb := &sandboxv1beta1.Sandbox{}
				if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: names[i]}, sb); err != nil {
					return err
				}
				if sb.Spec.OperatingMode == mode {
					return nil
				}
				sb.Spec.OperatingMode = mode
				return c.Update(context.Background(), sb)
			})
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

// TestAPIServerRestart stops kube-apiserver for ten seconds during a burst
// of 200 Sandboxes and 20 claims, then during a suspend wave and a resume
// wave. The controller is never restarted: it must reconnect, resync and
// converge, and its /readyz must say not-ready while the API server is
// away and ready again after.
func TestAPIServerRestart(t *testing.T) {
	c := newClient(t)
	kl := startKubelet(t)
	ctrl := startController(t, "ctrl", "--leader-elect=false")
	pid := ctrl.PID
	ready := watchReadiness(ctrl.Probe)
	defer ready.stop()
	ns := namespace(t, c, "apiserver")
	rec := record(t, ns)
	b := burst{ns: ns, sandboxes: 200, claims: 20, pool: 10}
	objs := b.objects(t, c)

	// 1. During the burst.
	start := time.Now()
	sent := make(chan error, 1)
	go func() { sent <- send(c, objs) }()
	time.Sleep(2 * time.Second)
	down := kl.outage(t, 10*time.Second)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Minute, "burst converges after the API server restart", converged(c, ns))
	burstConverge := time.Since(start)
	saw, _, from, again := ready.state()
	inv := check(t, c, ns, rec)
	errs, examples := errorLines(t, ctrl.LogPath)
	report(t, map[string]any{"phase": "burst", "apiserverDownSeconds": down.Seconds(), "componentsRevived": kl.takeRevived(), "convergeSeconds": burstConverge.Seconds(),
		"readyzNotReady": saw, "readyzNotReadySeconds": again.Sub(from).Seconds(), "invariants": inv, "errorLines": errs, "examples": examples})
	if inv.violations() > 0 {
		t.Errorf("after the burst: invariants violated: %+v", inv)
	}
	if !saw {
		t.Error("/readyz never said not-ready while kube-apiserver was down")
	}
	waitFor(t, 30*time.Second, "/readyz ready again", func() error {
		if _, ok, _, _ := ready.state(); !ok {
			return errNotReady
		}
		return nil
	})

	// 2. During a suspend wave, then a resume wave.
	var names []string
	for _, o := range objs {
		if sb, ok := o.(*sandboxv1beta1.Sandbox); ok {
			names = append(names, sb.Name)
		}
	}
	for _, mode := range []sandboxv1beta1.SandboxOperatingMode{sandboxv1beta1.SandboxOperatingModeSuspended, sandboxv1beta1.SandboxOperatingModeRunning} {
		errsBefore := errs
		start = time.Now()
		done := make(chan error, 1)
		go func() { done <- setModes(c, ns, names, mode) }()
		time.Sleep(time.Second)
		down = kl.outage(t, 10*time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Minute, string(mode)+" wave converges", func() error {
			if err := converged(c, ns)(); err != nil {
				return err
			}
			return podsMatchModes(c, ns)
		})
		took := time.Since(start)
		inv = check(t, c, ns, nil)
		errs, examples = errorLines(t, ctrl.LogPath)
		report(t, map[string]any{"phase": string(mode) + " wave", "apiserverDownSeconds": down.Seconds(), "componentsRevived": kl.takeRevived(), "convergeSeconds": took.Seconds(),
			"invariants": inv, "errorLines": errs - errsBefore, "examples": examples})
		if inv.violations() > 0 {
			t.Errorf("after the %s wave: invariants violated: %+v", mode, inv)
		}
	}
	if ctrl.PID != pid || syscall.Kill(pid, 0) != nil {
		t.Errorf("the controller (pid %d) did not survive the API server restarts", pid)
	}
}
