package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// floorCycle suspends, then resumes, the floor's n Ready Sandboxes in ns
// with the least work any controller of this API causes, done by the
// floor's client c (counted) with the bench's client user sending the
// users' patches (not counted, as in the controller's phases):
//   - suspend: the user sets spec.operatingMode Suspended; the floor deletes
//     the Pod and removes the Sandbox's pod-name annotation (applyPodName),
//     and once the bench's watch sees the Pod gone applies the status
//     render.SandboxStatus gives then (3 requests per Sandbox, the
//     contract's minimum);
//   - resume: the user sets it Running; the floor applies the Pod as
//     render.Sandbox renders it and the pod-name annotation, and once the
//     watch sees the Pod Ready applies the status (3 requests per Sandbox;
//     the Service stayed).
//
// Each ends as the controller's phase does, when the watch sees every
// Sandbox Suspended (PodTerminated), then Ready.
type floorCycle struct {
	c, user client.Client
	counts  *requestCounter
	watched cache.Cache
	ns      string
	n       int

	jobs chan func() error
	mu   sync.Mutex
	sbs  map[string]*sandboxv1beta1.Sandbox
	done map[string]bool
	// onPod is the phase's reaction to a Pod of ns (gone: deleted).
	onPod func(pod *corev1.Pod, gone bool)
	// podDone holds the Sandboxes whose Pod job of this phase succeeded.
	podDone map[string]bool
	// repairs counts jobs done again (see resync).
	repairs atomic.Int64
}

// resync looks, as a controller's resync would, at the Sandboxes the phase
// has not finished: one whose Pod is still there when it should be gone,
// or missing when it should run, has its Pod job queued again; one whose
// Pod is gone while suspending but whose status was never queued, its
// status. Under load kwok replays its delete of a Pod by name late, and
// can so delete the Pod a resume has just made again.
func (f *floorCycle) resync(t *testing.T, mode sandboxv1beta1.SandboxOperatingMode, podJob func(*sandboxv1beta1.Sandbox) error) {
	ctx := context.Background()
	var list sandboxv1beta1.SandboxList
	if err := f.watched.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		cur := &list.Items[i]
		f.mu.Lock()
		sb, queued, podDone := f.sbs[cur.Name], f.done[cur.Name], f.podDone[cur.Name]
		f.mu.Unlock()
		if sb == nil || sb.Spec.OperatingMode != mode || !podDone || phaseDone(cur, mode) {
			// Not patched yet, its Pod job still queued, or done.
			continue
		}
		pod := &corev1.Pod{}
		err := f.watched.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: cur.Name}, pod)
		exists := err == nil
		switch {
		case mode == sandboxv1beta1.SandboxOperatingModeSuspended && exists && pod.DeletionTimestamp == nil,
			mode == sandboxv1beta1.SandboxOperatingModeRunning && !exists:
			f.repairs.Add(1)
			f.mu.Lock()
			f.podDone[cur.Name] = false
			f.mu.Unlock()
			f.jobs <- f.podJobFor(sb, podJob)
		case mode == sandboxv1beta1.SandboxOperatingModeSuspended && !exists && !queued:
			f.queueStatus(mode, cur.Name, nil)
		}
	}
}

// queueStatus queues the one status write of the Sandbox name in the phase
// that sets mode, with its Pod (nil: gone), unless it is queued already or
// the Sandbox is not patched yet. Called with f.mu unlocked.
func (f *floorCycle) queueStatus(mode sandboxv1beta1.SandboxOperatingMode, name string, pod *corev1.Pod) {
	f.mu.Lock()
	sb := f.sbs[name]
	queue := sb != nil && sb.Spec.OperatingMode == mode && !f.done[name]
	if queue {
		f.done[name] = true
	}
	f.mu.Unlock()
	if !queue {
		return
	}
	f.jobs <- func() error {
		_, err := applyStatus(context.Background(), f.c, sb, pod, true)
		return err
	}
}

// podJobFor is the job carrying out podJob for sb, noting when it succeeded.
func (f *floorCycle) podJobFor(sb *sandboxv1beta1.Sandbox, podJob func(*sandboxv1beta1.Sandbox) error) func() error {
	return func() error {
		if err := podJob(sb); err != nil {
			return err
		}
		f.mu.Lock()
		f.podDone[sb.Name] = true
		f.mu.Unlock()
		return nil
	}
}

// phaseCondition is the condition a Sandbox shows once a phase that sets
// mode is done with it: Suspended (PodTerminated), or Ready
// (DependenciesReady).
func phaseCondition(mode sandboxv1beta1.SandboxOperatingMode) (typ, reason string) {
	if mode == sandboxv1beta1.SandboxOperatingModeSuspended {
		return sandboxv1beta1.ConditionSuspended, sandboxv1beta1.ReasonPodTerminated
	}
	return sandboxv1beta1.ConditionReady, sandboxv1beta1.ReasonDependenciesReady
}

// phaseDone says whether sb shows the condition the phase ends with.
func phaseDone(sb *sandboxv1beta1.Sandbox, mode sandboxv1beta1.SandboxOperatingMode) bool {
	typ, reason := phaseCondition(mode)
	c := apimeta.FindStatusCondition(sb.Status.Conditions, typ)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

func (f *floorCycle) run(t *testing.T) (suspend, resume Baseline) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.jobs = make(chan func() error, 2*f.n)
	f.sbs = map[string]*sandboxv1beta1.Sandbox{}
	for range floorWorkers {
		go func() {
			for {
				select {
				case job := <-f.jobs:
					if err := job(); err != nil {
						// As a controller would: try again (a stalled
						// floor would measure nothing).
						t.Logf("floor cycle, tried again: %v", err)
						f.repairs.Add(1)
						time.AfterFunc(200*time.Millisecond, func() { f.jobs <- job })
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	informer, err := f.watched.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(obj any, gone bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Namespace == f.ns {
			f.mu.Lock()
			on := f.onPod
			f.mu.Unlock()
			if on != nil {
				on(p, gone)
			}
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pod(o, false) },
		UpdateFunc: func(_, o any) { pod(o, false) },
		DeleteFunc: func(o any) { pod(o, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()

	suspend = f.phase(t, sandboxv1beta1.SandboxOperatingModeSuspended,
		func(sb *sandboxv1beta1.Sandbox) error {
			if err := f.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sb.Name}}); client.IgnoreNotFound(err) != nil {
				return err
			}
			return applyPodName(ctx, f.c, sb, "")
		},
		func(p *corev1.Pod, gone bool) (*corev1.Pod, bool) { return nil, gone })
	resume = f.phase(t, sandboxv1beta1.SandboxOperatingModeRunning,
		func(sb *sandboxv1beta1.Sandbox) error {
			desired, err := render.Sandbox(render.SandboxInputs{Sandbox: sb, PodName: sb.Name})
			if err != nil {
				return err
			}
			if err := f.c.Apply(ctx, desired.Pod, client.FieldOwner(fieldManager)); err != nil {
				return err
			}
			return applyPodName(ctx, f.c, sb, sb.Name)
		},
		func(p *corev1.Pod, gone bool) (*corev1.Pod, bool) {
			return p, !gone && p.DeletionTimestamp == nil && podReady(p)
		})
	return suspend, resume
}

// phase sets every Sandbox's operating mode to mode (the user's patch),
// then has the floor's workers carry out podJob for it; each Pod event for
// which statusFor says so queues the Sandbox's one status write, with the
// Pod it returns. It ends when every Sandbox shows phaseCondition(mode).
func (f *floorCycle) phase(t *testing.T, mode sandboxv1beta1.SandboxOperatingMode, podJob func(*sandboxv1beta1.Sandbox) error,
	statusFor func(*corev1.Pod, bool) (*corev1.Pod, bool)) Baseline {
	ctx := context.Background()
	f.mu.Lock()
	f.done, f.podDone = map[string]bool{}, map[string]bool{}
	f.onPod = func(p *corev1.Pod, gone bool) {
		if pod, write := statusFor(p, gone); write {
			f.queueStatus(mode, p.Name, pod)
		}
	}
	f.mu.Unlock()
	cpu := cpuByProcess(clusterDirOf)
	f.counts.reset()
	f.repairs.Store(0)
	start := time.Now()
	body := fmt.Sprintf(`{"spec":{"operatingMode":%q}}`, mode)
	parallel(f.n, func(i int) error {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("sb-%d", i)}}
		if err := f.user.Patch(ctx, sb, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
			return err
		}
		f.mu.Lock()
		f.sbs[sb.Name] = sb
		f.mu.Unlock()
		f.jobs <- f.podJobFor(sb, podJob)
		return nil
	}, t)
	typ, reason := phaseCondition(mode)
	for last := time.Now(); countCondition(t, f.watched, f.ns, typ, metav1.ConditionTrue, reason) != f.n; time.Sleep(50 * time.Millisecond) {
		if time.Since(last) > 2*time.Second {
			f.resync(t, mode, podJob)
			last = time.Now()
		}
	}
	res := Baseline{Seconds: time.Since(start).Seconds(), CPUSeconds: cpuDiff(cpuByProcess(clusterDirOf), cpu)}
	f.counts.fill(&res, f.n)
	res.Repairs = f.repairs.Load()
	f.mu.Lock()
	f.onPod = nil
	f.mu.Unlock()
	settle()
	return res
}
