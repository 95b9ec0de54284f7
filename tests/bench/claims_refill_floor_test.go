package bench

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// The waits of the controller's refill (WarmPoolReconciler's defaults):
// none while claims are being served, and refillQuiet after the last take.
const (
	refillQuiet   = 50 * time.Millisecond
	refillMaxHold = 30 * time.Second
)

// floorRefill does, for the claims floor with refill, what upstream's
// contract writes for a claim served from a warm pool beyond the claim's
// own three writes, by the floor's one client with no controller: the
// taken member's Pod relabelled as the adopted Sandbox renders it
// (render.Adopted), the claim's SandboxAdopted Event (events.k8s.io/v1, as
// the controller records it), and a new member in the taken one's place,
// made as the controller makes one: the member (render.WarmPoolMember),
// its Pod (render.Sandbox), its pod-name annotation, and once the bench's
// watch sees the Pod Ready, its status. The scheduler binds each new Pod
// and kwok reports it Ready, as for the controller's. A refill waits as
// the controller's pool does (refillQuiet, refillMaxHold); the writes run
// on floorWorkers goroutines from one queue, as the controller's workers
// do. A member is offered (free) once its status is written.
type floorRefill struct {
	ctx     context.Context
	t       *testing.T
	c       client.Client
	watched cache.Cache
	ns      string
	pool    *extv1beta1.SandboxWarmPool
	tmpl    *extv1beta1.SandboxTemplate
	free    chan *sandboxv1beta1.Sandbox
	jobs    chan func() error

	mu        sync.Mutex
	next      int // the next member's index
	missing   int // members taken and not replaced yet
	serving   int // claims seen and not yet given their status
	lastTake  time.Time
	heldSince time.Time
	starting  map[string]*startingMember
	first     string // the first member's name
	checked   bool   // a relabel was checked to change the Pod
}

// startingMember is a new member whose Pod is not Ready yet.
type startingMember struct {
	sb     *sandboxv1beta1.Sandbox
	named  chan struct{} // closed once its pod-name annotation is written
	queued bool          // its status is queued
}

// startFloorRefill starts the refill's workers, its loop and its watch of
// the namespace's Pods; they stop with ctx. free holds up to capacity
// members.
func startFloorRefill(ctx context.Context, t *testing.T, c client.Client, watched cache.Cache, ns string,
	pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, capacity int) *floorRefill {
	r := &floorRefill{ctx: ctx, t: t, c: c, watched: watched, ns: ns, pool: pool, tmpl: tmpl,
		free: make(chan *sandboxv1beta1.Sandbox, capacity), jobs: make(chan func() error, 4*capacity),
		starting: map[string]*startingMember{}}
	informer, err := watched.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Namespace == ns && podReady(pod) {
			r.podReady(pod)
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-ctx.Done()
		_ = informer.RemoveEventHandler(reg)
	}()
	for range floorWorkers {
		go r.work()
	}
	go r.loop()
	return r
}

func (r *floorRefill) work() {
	for {
		select {
		case job := <-r.jobs:
			if err := job(); err != nil && r.ctx.Err() == nil {
				r.t.Errorf("claims floor, refill: %v", err)
			}
		case <-r.ctx.Done():
			return
		}
	}
}

// loop queues the missing members once no claim is being served and none
// was taken for refillQuiet, or once they were held for refillMaxHold.
func (r *floorRefill) loop() {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-tick.C:
			r.mu.Lock()
			n, from := r.missing, r.next
			quiet := r.serving == 0 && now.Sub(r.lastTake) >= refillQuiet
			if n == 0 || (!quiet && now.Sub(r.heldSince) < refillMaxHold) {
				r.mu.Unlock()
				continue
			}
			r.missing, r.next = 0, r.next+n
			r.mu.Unlock()
			for i := from; i < from+n; i++ {
				r.jobs <- func() error { return r.newMember(i) }
			}
		}
	}
}

// fill makes the pool's m members and waits until they are offered.
func (r *floorRefill) fill(m int) {
	r.mu.Lock()
	r.missing, r.heldSince = m, time.Now()
	r.mu.Unlock()
	r.waitFull(m)
}

// full reports m members offered and none on its way.
func (r *floorRefill) full(m int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.free) == m && r.missing == 0 && len(r.starting) == 0
}

func (r *floorRefill) waitFull(m int) {
	for !r.full(m) {
		if r.ctx.Err() != nil {
			r.t.Fatal(r.ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// arrive counts a claim seen and not yet given its status, until leave.
func (r *floorRefill) arrive() {
	r.mu.Lock()
	r.serving++
	r.mu.Unlock()
}

func (r *floorRefill) leave() {
	r.mu.Lock()
	r.serving--
	r.mu.Unlock()
}

// taken queues the relabel of the Pod of member, just taken by claim, and
// counts it missing from the pool.
func (r *floorRefill) taken(claim *extv1beta1.SandboxClaim, member *sandboxv1beta1.Sandbox) error {
	adopted := render.Adopted(claim, r.tmpl, member)
	after, err := render.Sandbox(render.SandboxInputs{Sandbox: adopted, PodName: adopted.Name})
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.missing == 0 {
		r.heldSince = time.Now()
	}
	r.missing++
	r.lastTake = time.Now()
	check := !r.checked
	r.checked = true
	r.mu.Unlock()
	if check {
		// Once: the first take must change the Pod it relabels.
		before, err := render.Sandbox(render.SandboxInputs{Sandbox: member, PodName: member.Name})
		if err != nil {
			return err
		}
		if maps.Equal(before.Pod.Labels, after.Pod.Labels) && maps.Equal(before.Pod.Annotations, after.Pod.Annotations) {
			r.t.Errorf("claims floor, refill: the adopted member %s renders the Pod its member had: the floor would relabel nothing", member.Name)
		}
	}
	r.jobs <- func() error { return r.c.Apply(r.ctx, after.Pod, client.FieldOwner(fieldManager)) }
	return nil
}

// adopted queues claim's SandboxAdopted Event, naming member.
func (r *floorRefill) adopted(claim *extv1beta1.SandboxClaim, member string) {
	r.jobs <- func() error {
		now := time.Now()
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: fmt.Sprintf("%s.%x", claim.Name, now.UnixNano())},
			EventTime:  metav1.NewMicroTime(now), Type: corev1.EventTypeNormal,
			ReportingController: fieldManager, ReportingInstance: fieldManager + "-bench",
			Action: "Adopt", Reason: sandboxv1beta1.EventSandboxAdopted,
			Regarding: corev1.ObjectReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
				Namespace: r.ns, Name: claim.Name, UID: claim.UID},
			Related: &corev1.ObjectReference{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: sandboxv1beta1.SandboxKind.Kind,
				Namespace: r.ns, Name: member},
			Note: fmt.Sprintf("took warm Sandbox %s from SandboxWarmPool %s", member, r.pool.Name),
		}
		return r.c.Create(r.ctx, ev)
	}
}

// newMember creates the pool's i-th member: the member, its Pod, its pod-name
// annotation; its status follows once its Pod is Ready (podReady).
func (r *floorRefill) newMember(i int) error {
	ac, err := render.WarmPoolMember(render.WarmPoolInputs{Pool: r.pool, Template: r.tmpl},
		memberName(r.pool, i))
	if err != nil {
		return err
	}
	if err := r.c.Apply(r.ctx, ac, client.FieldOwner(fieldManager)); err != nil {
		return err
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(ac, sb); err != nil {
		return err
	}
	s := &startingMember{sb: sb, named: make(chan struct{})}
	r.mu.Lock()
	r.starting[sb.Name] = s
	if r.first == "" {
		r.first = sb.Name
	}
	r.mu.Unlock()
	desired, err := render.Sandbox(render.SandboxInputs{Sandbox: sb, PodName: sb.Name})
	if err != nil {
		return err
	}
	if err := r.c.Apply(r.ctx, desired.Pod, client.FieldOwner(fieldManager)); err != nil {
		return err
	}
	err = applyPodName(r.ctx, r.c, sb, sb.Name)
	close(s.named)
	return err
}

// podReady queues the status of the starting member whose Pod is pod.
func (r *floorRefill) podReady(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.starting[pod.Name]
	if s == nil || s.queued {
		return
	}
	s.queued = true
	r.jobs <- func() error {
		<-s.named
		status, err := applyStatus(r.ctx, r.c, s.sb, pod, false)
		if err != nil {
			return err
		}
		sb, err := r.cached(s.sb.Name, *status.ResourceVersion)
		if err != nil {
			return err
		}
		r.mu.Lock()
		delete(r.starting, pod.Name)
		r.mu.Unlock()
		r.free <- sb
		return nil
	}
}

// cached is Sandbox name as the bench's watch has it once it has seen
// resourceVersion rv, with its managed fields (which an apply's
// configuration does not keep, and the take reads), as the controller
// offers members from its cache.
func (r *floorRefill) cached(name, rv string) (*sandboxv1beta1.Sandbox, error) {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return nil, err
	}
	for {
		sb := &sandboxv1beta1.Sandbox{}
		if err := r.watched.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: name}, sb); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if have, _ := strconv.ParseUint(sb.ResourceVersion, 10, 64); have >= want {
			return sb, nil
		}
		select {
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
