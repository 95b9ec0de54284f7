package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/status,verbs=get;patch
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools/finalizers,verbs=update
// +kubebuilder:rbac:groups=agents.x-k8s.io,resources=sandboxes,verbs=get;list;watch;create;patch;delete

// expectationTTL bounds how long a member the pool created (or deleted) is
// expected to show up in (or vanish from) the cache; after that the cache is
// believed again.
const expectationTTL = 30 * time.Second

// createParallelism bounds the member creations in flight for one pool.
const createParallelism = 16

// WarmPoolReconciler keeps each SandboxWarmPool at its number of members,
// rendered from its template, and reports how many are Ready.
type WarmPoolReconciler struct {
	Client   client.Client
	Engine   *ssa.Engine
	Recorder events.EventRecorder
	// Defaults are what members' Pods get where the template leaves a
	// field unset; members are checked with them.
	Defaults render.DefaultsSource
	// MaxBatch caps the members created in one pass.
	MaxBatch int
	// Grace is how long a member may take to become Ready before the pool
	// reports it as not progressing. Zero means 5 minutes.
	Grace time.Duration
	Clock clock.PassiveClock
	// Queue, when set, tells when claims last took members and which
	// wait for one: while a burst of claims is being served from the pool
	// (WarmQueue.Serving: claims wait, and moved less than RefillMaxDelay
	// ago), or one took a member less than RefillQuiet ago, refilling
	// waits, so claims are served before the API server is busy with
	// replacements. It never waits longer than RefillMaxHold in a row.
	Queue                                      *WarmQueue
	RefillQuiet, RefillMaxDelay, RefillMaxHold time.Duration
	// SandboxIndexer, when set, is the Sandbox informer's indexer, where
	// members are read, uncopied (controlledSandboxes); nil lists them
	// through Client.
	SandboxIndexer toolscache.Indexer
	// StatusHold is how long a status that only counts members on their
	// way back to the pool's size may wait to be written (statusHold);
	// negative writes every one at once.
	StatusHold time.Duration
	// Policy holds the policies members are checked against before any is
	// created.
	Policy *policy.Holder
	// Suffix, when set, draws the suffixes of new member names instead of
	// randomSuffix (tests fix them with it); it is called from concurrent
	// creates.
	Suffix func() string

	// memory holds, per pool, what this process last wrote and reported,
	// and the expectations of its members.
	memory poolMemory

	// skeleton loads, skips, forgets and retries around reconcile.
	skeleton skeleton[*extv1beta1.SandboxWarmPool]
}

// poolMemory is what the pool reconciler remembers of each pool (by UID),
// dropped when the pool goes (forget).
type poolMemory struct {
	// status is the status last written, its conditions as reported
	// (poolStatus).
	status statusMemo[[]metav1.Condition]
	// notProgressing holds when the pool was reported not progressing
	// (the WarmPoolNotProgressing event), while it was last so reported,
	// as upstream keeps it.
	notProgressing objectMemo[time.Time]
	// expected holds the members created or deleted and not yet
	// reflected by the cache.
	expected objectMemo[*expectations]
	// deferredSince is when refilling was first put off.
	deferredSince objectMemo[time.Time]
	// statusHeldSince is when a status write was first held
	// (statusHold).
	statusHeldSince objectMemo[time.Time]
}

type expectations struct {
	mu      sync.Mutex
	created map[string]time.Time    // member name -> when created
	deleted map[types.UID]time.Time // member UID -> when deleted
}

// SetupWithManager registers the reconciler and its watches.
func (r *WarmPoolReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.SetDefaults()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandboxwarmpool").
		For(&extv1beta1.SandboxWarmPool{}).
		Watches(&sandboxv1beta1.Sandbox{}, enqueueController(extv1beta1.WarmPoolKind)).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate))
	b = watchModeLabels(b, mgr.GetClient(), r.Policy, func() client.ObjectList { return &extv1beta1.SandboxWarmPoolList{} })
	// A pool that creates nothing for want of a runtime class looks again
	// when the default one changes.
	return watchRuntimeClasses(b, r.Defaults, r.allPools).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// SetDefaults fills the fields left zero: the real clock, a 5 minute grace
// period, the refill's waits (RefillQuiet 50 ms, RefillMaxDelay 5 s,
// RefillMaxHold 30 s) and StatusHold 1 s.
func (r *WarmPoolReconciler) SetDefaults() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Grace == 0 {
		r.Grace = 5 * time.Minute
	}
	if r.RefillQuiet == 0 {
		r.RefillQuiet = 50 * time.Millisecond
	}
	if r.RefillMaxDelay == 0 {
		r.RefillMaxDelay = 5 * time.Second
	}
	if r.RefillMaxHold == 0 {
		r.RefillMaxHold = 30 * time.Second
	}
	if r.StatusHold == 0 {
		r.StatusHold = time.Second
	}
}

// refillWait says how long to put off creating members because claims are
// taking them right now: while a burst of claims is served from the pool
// (claims wait for a member, or for the commit of the one they took, and
// moved less than RefillMaxDelay ago: a refill made now would compete with
// them for the API server, and they need none of it), and for RefillQuiet
// after the last take (the taking claim's commit is still being written);
// zero means go ahead. It never puts a refill off for more than
// RefillMaxHold in a row.
func (r *WarmPoolReconciler) refillWait(pool *extv1beta1.SandboxWarmPool, now time.Time) time.Duration {
	if r.Queue == nil {
		return 0
	}
	key := client.ObjectKeyFromObject(pool)
	var quiet time.Duration
	if last := r.Queue.LastTake(key); !last.IsZero() {
		quiet = last.Add(r.RefillQuiet).Sub(now)
	}
	if r.Queue.Serving(key, now, r.RefillMaxDelay) {
		quiet = max(quiet, r.RefillQuiet)
	}
	if quiet <= 0 {
		r.memory.deferredSince.Forget(key)
		return 0
	}
	return min(quiet, holdLeft(&r.memory.deferredSince, pool, r.RefillMaxHold, now))
}

// poolsOfTemplate maps a template to the pools that name it.
func (r *WarmPoolReconciler) poolsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	var pools extv1beta1.SandboxWarmPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(o.GetNamespace()), client.MatchingFields{extv1beta1.IndexTemplateRef: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

// expectationsFor returns the expectations of the pool's members (one
// reconcile of a pool runs at a time).
func (r *WarmPoolReconciler) expectationsFor(pool *extv1beta1.SandboxWarmPool) *expectations {
	key := client.ObjectKeyFromObject(pool)
	if exp, ok := r.memory.expected.Recall(key, pool.UID); ok {
		return exp
	}
	exp := &expectations{created: map[string]time.Time{}, deleted: map[types.UID]time.Time{}}
	r.memory.expected.Remember(key, pool.UID, exp)
	return exp
}

// Reconcile brings one pool closer to its desired members. A pool being
// deleted is left to garbage collection, which removes its members.
func (r *WarmPoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.skeleton.run(ctx, req, objectKind[*extv1beta1.SandboxWarmPool]{
		controller: "sandboxwarmpool", reader: r.Client, deletion: forgetDeleting,
		object: func() *extv1beta1.SandboxWarmPool { return &extv1beta1.SandboxWarmPool{} },
		forget: r.forget, body: r.reconcile, engine: r.Engine, kind: "SandboxWarmPool",
	})
}

// forget drops what this process remembers of a pool that is gone or
// going: with the pool, the expectations of its members.
func (r *WarmPoolReconciler) forget(key types.NamespacedName, _ *extv1beta1.SandboxWarmPool) {
	r.memory.status.Forget(key)
	r.memory.notProgressing.Forget(key)
	r.memory.expected.Forget(key)
	r.memory.deferredSince.Forget(key)
	r.memory.statusHeldSince.Forget(key)
	r.Engine.Forget("SandboxWarmPool", key.Namespace, key.Name)
}

// statuses is where the pool reconciler's status writer writes.
func (r *WarmPoolReconciler) statuses() statusWriter[[]metav1.Condition] {
	return statusWriter[[]metav1.Condition]{engine: r.Engine, memory: &r.memory.status, clock: r.Clock}
}

func (r *WarmPoolReconciler) reconcile(ctx context.Context, pool *extv1beta1.SandboxWarmPool) (reconcile.Result, error) {
	now := r.Clock.Now()

	tmpl := &extv1beta1.SandboxTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl); {
	case apierrors.IsNotFound(err):
		tmpl = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading template: %w", err)
	}

	// The members are the cache's own (read only: settle copies a member
	// it marks, and plans never change their inputs); copying every
	// member on every look of a pool of 100 was a fifth of the
	// controller's CPU while claims took members one by one.
	items, err := r.Members(ctx, pool)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("listing members: %w", err)
	}
	exp := r.expectationsFor(pool)
	members, pending := r.settle(ctx, pool.Namespace, exp, items, now)

	_, reported := r.memory.notProgressing.Recall(client.ObjectKeyFromObject(pool), pool.UID)
	in := render.WarmPoolPlanInputs{
		WarmPoolInputs: render.WarmPoolInputs{Pool: pool, Template: tmpl},
		Members:        members, Pending: pending, MaxBatch: r.MaxBatch,
		Taken: func(name string) bool { return r.taken(ctx, pool.Namespace, name) }, Suffix: suffixes(r.suffix),
		Policies: r.Policy.Get() != nil, Defaults: render.CurrentDefaults(r.Defaults),
		Previous: poolStatus.previous(&r.memory.status, pool), NotProgressingReported: reported, Grace: r.Grace, Now: now,
	}
	// Whether to wait is decided on a plan of one new member at most:
	// while claims take members one by one, the pool looks again and
	// again, and rendering every member it lacks each time (up to a whole
	// burst's worth) only to wait was most of its CPU.
	probe := in
	probe.MaxBatch = 1
	plan, err := render.PlanWarmPool(probe)
	if err != nil {
		return reconcile.Result{}, err
	}
	if count(plan, render.ActionCreate) > 0 && count(plan, render.ActionDelete) == 0 {
		if wait := r.refillWait(pool, now); wait > 0 {
			// Claims are taking members: serve them first. Nothing is
			// judged or written now, not even status; the pool looks
			// again shortly.
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if in.MaxBatch != 1 {
		if plan, err = render.PlanWarmPool(in); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(plan.Checks) > 0 {
		var denied *policyError
		switch err := r.admit(ctx, pool, plan.Checks); {
		case errors.As(err, &denied):
			// Plan again knowing the denial: no members are created,
			// and status (and an event) say why.
			in.PolicyDenied = denied.Error()
			if plan, err = render.PlanWarmPool(in); err != nil {
				return reconcile.Result{}, err
			}
		case err != nil:
			return reconcile.Result{}, err
		}
	}
	withdrawn, held := r.withdraw(ctx, plan)
	if len(held) > 0 {
		// A claim holds a member the plan gives up: plan again leaving it
		// alone (the report counts it, and the pool looks again shortly).
		in.Held = held
		if plan, err = render.PlanWarmPool(in); err != nil {
			r.restore(withdrawn)
			return reconcile.Result{}, err
		}
	}
	return r.run(ctx, in, plan, exp, withdrawn, len(pending) > 0, now)
}

// admit checks a new member, and what it makes, against the policies in
// the policy modes of the pool's namespace. It returns a *policyError on
// a denial.
func (r *WarmPoolReconciler) admit(ctx context.Context, pool *extv1beta1.SandboxWarmPool, checks []render.Check) error {
	set := r.Policy.Get()
	if set == nil {
		return nil
	}
	inNS, _ := r.Policy.In(ctx, pool.Namespace)
	_, err := checkPlanned(inNS, set, checks)
	return err
}

// count counts a plan's steps of one action.
func count(plan render.Plan, a render.Action) int {
	n := 0
	for _, s := range plan.Steps {
		if s.Action == a {
			n++
		}
	}
	return n
}

// writeStatus writes a pool's status through the status writer.
func (r *WarmPoolReconciler) writeStatus(ctx context.Context, pool *extv1beta1.SandboxWarmPool, desired *extac.SandboxWarmPoolApplyConfiguration) error {
	_, err := poolStatus.write(ctx, r.statuses(), pool, desired, statusWrite[[]metav1.Condition]{reported: conditionsOf(desired.Status.Conditions)})
	return err
}
