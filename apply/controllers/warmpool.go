package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
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
	// Defaults are applied to every member's spec.
	Defaults render.Defaults
	// MaxBatch caps the members created in one pass.
	MaxBatch int
	// Grace is how long a member may take to become Ready before the pool
	// reports it as not progressing. Zero means 5 minutes.
	Grace time.Duration
	Clock clock.PassiveClock
	// Queue, when set, tells when claims last took members: while claims
	// are taking members, refilling waits (RefillQuiet after the last take,
	// for at most RefillMaxDelay), so a burst of claims is served before the
	// API server is busy with replacements.
	Queue                       *WarmQueue
	RefillQuiet, RefillMaxDelay time.Duration
	// Policy holds the policies members are checked against before any is
	// created.
	Policy *policy.Holder

	status statusMemory
	// expected holds, per pool UID, the members created or deleted and not
	// yet reflected by the cache.
	expected sync.Map // types.UID -> *expectations
	// deferredSince is, per pool UID, when refilling was first put off.
	deferredSince sync.Map // types.UID -> time.Time

	// retries backs off expected, passing failures without logging them.
	retries retries
}

type expectations struct {
	mu      sync.Mutex
	created map[string]time.Time    // member name -> when created
	deleted map[types.UID]time.Time // member UID -> when deleted
}

// SetupWithManager registers the reconciler and its watches.
func (r *WarmPoolReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.SetDefaults()
	return ctrl.NewControllerManagedBy(mgr).
		Named("sandboxwarmpool").
		For(&extv1beta1.SandboxWarmPool{}).
		Owns(&sandboxv1beta1.Sandbox{}).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// SetDefaults fills the fields left zero: the real clock and a 5 minute
// grace period.
func (r *WarmPoolReconciler) SetDefaults() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Grace == 0 {
		r.Grace = 5 * time.Minute
	}
	if r.RefillQuiet == 0 {
		r.RefillQuiet = 300 * time.Millisecond
	}
	if r.RefillMaxDelay == 0 {
		r.RefillMaxDelay = 2 * time.Second
	}
}

// refillWait says how long to put off creating members because claims are
// taking them right now; zero means go ahead.
func (r *WarmPoolReconciler) refillWait(pool *extv1beta1.SandboxWarmPool, now time.Time) time.Duration {
	if r.Queue == nil {
		return 0
	}
	last := r.Queue.LastTake(client.ObjectKeyFromObject(pool))
	quiet := last.Add(r.RefillQuiet).Sub(now)
	if last.IsZero() || quiet <= 0 {
		r.deferredSince.Delete(pool.UID)
		return 0
	}
	v, _ := r.deferredSince.LoadOrStore(pool.UID, now)
	limit := v.(time.Time).Add(r.RefillMaxDelay).Sub(now)
	if limit <= 0 {
		r.deferredSince.Delete(pool.UID)
		return 0
	}
	return min(quiet, limit)
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

func (r *WarmPoolReconciler) expectationsFor(uid types.UID) *expectations {
	v, _ := r.expected.LoadOrStore(uid, &expectations{created: map[string]time.Time{}, deleted: map[types.UID]time.Time{}})
	return v.(*expectations)
}

// Reconcile brings one pool closer to its desired members.
func (r *WarmPoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := r.reconcile(ctx, req)
	return r.retries.quiet(ctx, "sandboxwarmpool", req, result, err)
}

func (r *WarmPoolReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pool.DeletionTimestamp != nil || namespaceDeleting(ctx, r.Client, pool.Namespace) {
		r.status.forget(req.NamespacedName)
		r.expected.Delete(pool.UID)
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()

	tmpl := &extv1beta1.SandboxTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, tmpl); {
	case apierrors.IsNotFound(err):
		tmpl = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading template: %w", err)
	}

	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingFields{IndexControllerUID: string(pool.UID)}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing members: %w", err)
	}
	exp := r.expectationsFor(pool.UID)
	members, pending := r.settle(ctx, pool.Namespace, exp, list.Items, now)

	plan, err := render.PlanWarmPool(render.WarmPoolPlanInputs{
		WarmPoolInputs: render.WarmPoolInputs{Pool: pool, Template: tmpl, Defaults: r.Defaults},
		Members:        members, Pending: pending, MaxBatch: r.MaxBatch,
		Taken: func(name string) bool { return r.taken(ctx, pool.Namespace, name) },
	})
	statusIn := render.WarmPoolStatusInputs{
		Pool: pool, Previous: r.status.previous(pool), Members: members, TemplateMissing: tmpl == nil,
		Grace: r.Grace, Now: metav1.NewTime(now.Truncate(time.Second)),
	}
	if err != nil {
		statusIn.BlockedReason, statusIn.BlockedMessage = extv1beta1.ReasonReconcilerError, err.Error()
		return reconcile.Result{}, r.writeStatus(ctx, pool, statusIn)
	}

	if len(plan.Create) > 0 {
		// Every member renders alike: checking the first judges them all.
		probe := &sandboxv1beta1.Sandbox{}
		if err := convert(plan.Create[0], probe); err != nil {
			return reconcile.Result{}, err
		}
		var denied *policyError
		var terminal *terminalError
		switch err := checkNewSandbox(ctx, r.Policy.Get(), probe); {
		case errors.As(err, &terminal):
			// Members that cannot be rendered: only a template change
			// helps (the template is watched). Report; do not retry.
			plan.Create = nil
			statusIn.BlockedReason, statusIn.BlockedMessage = extv1beta1.ReasonReconcilerError,
				"no members are created: "+terminal.Error()
		case errors.As(err, &denied):
			plan.Create = nil
			statusIn.BlockedReason, statusIn.BlockedMessage = sandboxv1beta1.ReasonPolicyDenied,
				"no members are created: "+denied.Error()
			if c := findCondition(r.previousOrOwn(pool), extv1beta1.ConditionReady); c == nil || c.Reason != sandboxv1beta1.ReasonPolicyDenied {
				r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, EventPolicyDenied, "Check", "%s", statusIn.BlockedMessage)
			}
		case err != nil:
			return reconcile.Result{}, err
		}
	}
	if len(plan.Create) > 0 && len(plan.Delete) == 0 {
		if wait := r.refillWait(pool, now); wait > 0 {
			// Claims are taking members: serve them first. Nothing is
			// written now, not even status; the pool looks again shortly.
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}

	changes, deleted, err := r.deleteMembers(ctx, exp, plan.Delete, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	created, err := r.create(ctx, exp, plan.Create, now)
	changes = append(changes, created...)
	if err != nil {
		var invalid *invalidMember
		if errors.As(err, &invalid) {
			// The template renders members the API server refuses: only a
			// template change helps. Report it; do not retry.
			statusIn.BlockedReason, statusIn.BlockedMessage = extv1beta1.ReasonReconcilerError, err.Error()
			if serr := r.writeStatus(ctx, pool, statusIn); serr != nil {
				return reconcile.Result{}, serr
			}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if changes.Changed() {
		log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
	}

	// Status counts what exists: members deleted just now are gone.
	var remaining []*sandboxv1beta1.Sandbox
	for _, m := range members {
		if !deleted[m.UID] {
			remaining = append(remaining, m)
		}
	}
	statusIn.Members = remaining
	if err := r.writeStatus(ctx, pool, statusIn); err != nil {
		return reconcile.Result{}, err
	}

	var result reconcile.Result
	if len(pending) > 0 || len(plan.Create) > 0 {
		// If a created member never shows up, look again once the
		// expectation runs out.
		result.RequeueAfter = expectationTTL
	}
	if wait := r.nextGraceCheck(remaining, now); wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
		result.RequeueAfter = wait
	}
	if len(deleted) < len(plan.Delete) && (result.RequeueAfter == 0 || result.RequeueAfter > heldRecheck) {
		// A claim held a member the plan gives up: it either adopts it
		// (the member leaves the pool) or hands it back, which sends no
		// event the pool would see. Decide again shortly.
		result.RequeueAfter = heldRecheck
	}
	return result, nil
}

// heldRecheck is how soon a pool looks again at members it could not
// delete because a claim held them.
const heldRecheck = time.Second

// deleteMembers deletes the members the plan gives up, each only after
// taking it out of the claim queue (a member a claim holds is skipped: the
// claim's adoption is in flight and the member is about to leave the pool)
// and only if it is still exactly the member the plan saw (UID and
// resourceVersion preconditions: a member adopted meanwhile, by this or
// any other controller, is never deleted). It returns what it deleted.
func (r *WarmPoolReconciler) deleteMembers(ctx context.Context, exp *expectations, members []*sandboxv1beta1.Sandbox, now time.Time) (ssa.ChangeSet, map[types.UID]bool, error) {
	var changes ssa.ChangeSet
	deleted := map[types.UID]bool{}
	for _, m := range members {
		if r.Queue != nil && !r.Queue.Withdraw(m) {
			log.FromContext(ctx).V(1).Info("not deleting a member a claim is taking", "sandbox", m.Name)
			continue
		}
		exp.mu.Lock()
		exp.deleted[m.UID] = now
		exp.mu.Unlock()
		c, err := r.Engine.DeleteIfUnchanged(ctx, "Sandbox", m)
		changes = append(changes, c)
		if err != nil {
			exp.mu.Lock()
			delete(exp.deleted, m.UID)
			exp.mu.Unlock()
			if r.Queue != nil {
				r.Queue.Restore(m)
			}
			// A Conflict means the member changed since the cache saw it
			// (taken by a claim, or its status moved on): plan again from
			// a fresh view.
			return changes, deleted, err
		}
		deleted[m.UID] = true
	}
	return changes, deleted, nil
}

// settle reconciles the pool's expectations with what the cache shows: it
// returns the members to plan with (those deleted by us marked as deleting)
// and the names created by us that the cache does not show yet.
func (r *WarmPoolReconciler) settle(ctx context.Context, namespace string, exp *expectations, items []sandboxv1beta1.Sandbox, now time.Time) ([]*sandboxv1beta1.Sandbox, []string) {
	exp.mu.Lock()
	defer exp.mu.Unlock()
	seen := map[types.UID]bool{}
	members := make([]*sandboxv1beta1.Sandbox, 0, len(items))
	for i := range items {
		m := &items[i]
		seen[m.UID] = true
		delete(exp.created, m.Name)
		if _, ok := exp.deleted[m.UID]; ok && m.DeletionTimestamp == nil {
			m = m.DeepCopy()
			m.DeletionTimestamp = &metav1.Time{Time: now}
		}
		members = append(members, m)
	}
	for uid, at := range exp.deleted {
		if !seen[uid] || now.Sub(at) > expectationTTL {
			delete(exp.deleted, uid)
		}
	}
	var pending []string
	for name, at := range exp.created {
		switch {
		case now.Sub(at) > expectationTTL:
			delete(exp.created, name)
		case r.taken(ctx, namespace, name):
			// Created and already taken by a claim (or otherwise no longer
			// ours): the cache has caught up.
			delete(exp.created, name)
		default:
			pending = append(pending, name)
		}
	}
	return members, pending
}

// taken reports whether a member name is in use in the namespace, as far as
// the cache knows: by a Sandbox, or by a Pod (a deleted member's Pod may
// still be terminating, and a new member of the same name would wait for
// it). The API server refuses a Sandbox name if the cache is behind.
func (r *WarmPoolReconciler) taken(ctx context.Context, namespace, name string) bool {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	for _, o := range []client.Object{&sandboxv1beta1.Sandbox{}, &corev1.Pod{}} {
		if err := r.Client.Get(ctx, key, o); err == nil || !apierrors.IsNotFound(err) {
			return true
		}
	}
	return false
}

// invalidMember reports a member the API server refuses as invalid.
type invalidMember struct{ err error }

func (e *invalidMember) Error() string { return e.err.Error() }
func (e *invalidMember) Unwrap() error { return e.err }

// create creates members, a bounded number at a time. Names already taken
// (the cache was behind) are skipped; the next pass picks others.
func (r *WarmPoolReconciler) create(ctx context.Context, exp *expectations, members []*sandboxac.SandboxApplyConfiguration, now time.Time) (ssa.ChangeSet, error) {
	if len(members) == 0 {
		return nil, nil
	}
	exp.mu.Lock()
	for _, m := range members {
		exp.created[*m.Name] = now
	}
	exp.mu.Unlock()

	var (
		mu      sync.Mutex
		changes ssa.ChangeSet
		errs    []error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, createParallelism)
	)
	for _, m := range members {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			c, err := r.createOne(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				exp.mu.Lock()
				delete(exp.created, *m.Name)
				exp.mu.Unlock()
				errs = append(errs, err)
				return
			}
			changes = append(changes, c)
		}()
	}
	wg.Wait()
	return changes, errors.Join(errs...)
}

func (r *WarmPoolReconciler) createOne(ctx context.Context, m *sandboxac.SandboxApplyConfiguration) (ssa.Change, error) {
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert(m, sb); err != nil {
		return ssa.Change{}, fmt.Errorf("converting member %s: %w", *m.Name, err)
	}
	c, exists, err := r.Engine.Create(ctx, "Sandbox", sb)
	if apierrors.IsInvalid(err) {
		return c, &invalidMember{err}
	}
	if exists {
		// The cache had not shown it; the next pass will.
		return c, nil
	}
	return c, err
}

// convert turns an apply configuration into the typed object it describes.
func convert(ac, obj any) error {
	b, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, obj)
}

// nextGraceCheck returns when the first not-Ready member passes the grace
// period, zero if none will.
func (r *WarmPoolReconciler) nextGraceCheck(members []*sandboxv1beta1.Sandbox, now time.Time) time.Duration {
	var next time.Duration
	for _, m := range members {
		if render.IsSandboxReady(m) || m.DeletionTimestamp != nil {
			continue
		}
		wait := m.CreationTimestamp.Add(r.Grace).Sub(now) + time.Second
		if wait > 0 && (next == 0 || wait < next) {
			next = wait
		}
	}
	return next
}

func (r *WarmPoolReconciler) writeStatus(ctx context.Context, pool *extv1beta1.SandboxWarmPool, in render.WarmPoolStatusInputs) error {
	desired := render.WarmPoolStatus(in)
	fp := ssa.Fingerprint(desired)
	if r.status.written(pool, fp) {
		r.Engine.Saved("SandboxWarmPoolStatus", pool.Namespace, pool.Name)
		return nil
	}
	conditions := conditionsOf(desired.Status.Conditions)
	before := findCondition(r.previousOrOwn(pool), extv1beta1.ConditionProgressing)
	change, err := ssa.ApplyStatus(ctx, r.Engine, "SandboxWarmPool", desired, pool, extac.ExtractSandboxWarmPoolStatus)
	if err != nil {
		return err
	}
	if change.Action != ssa.Unchanged {
		r.status.remember(pool, fp, conditions, r.Clock.Now())
	}
	after := findCondition(conditions, extv1beta1.ConditionProgressing)
	switch {
	case after == nil:
	case after.Status == metav1.ConditionFalse && (before == nil || before.Status != metav1.ConditionFalse || before.Reason != after.Reason):
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, sandboxv1beta1.EventWarmPoolNotProgressing, "Reconcile", "%s", after.Message)
	case after.Status == metav1.ConditionTrue && before != nil && before.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, sandboxv1beta1.EventWarmPoolProgressing, "Reconcile", "%s", after.Message)
	}
	return nil
}

func (r *WarmPoolReconciler) previousOrOwn(pool *extv1beta1.SandboxWarmPool) []metav1.Condition {
	if p := r.status.previous(pool); p != nil {
		return p
	}
	return pool.Status.Conditions
}
