package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// withdraw takes the members plan deletes out of the claim queue before it
// runs, so no claim takes one meanwhile. It returns the members withdrawn
// and those a claim holds (its adoption is in flight): the plan is made
// again with them Held, leaving them alone.
func (r *WarmPoolReconciler) withdraw(ctx context.Context, plan render.Plan) (withdrawn map[types.UID]*sandboxv1beta1.Sandbox, held map[types.UID]bool) {
	withdrawn = map[types.UID]*sandboxv1beta1.Sandbox{}
	for _, s := range plan.Steps {
		m, ok := s.Live.(*sandboxv1beta1.Sandbox)
		if s.Action != render.ActionDelete || !ok {
			continue
		}
		if r.Queue != nil && !r.Queue.Withdraw(m) {
			log.FromContext(ctx).V(1).Info("not deleting a member a claim is taking", "sandbox", m.Name)
			if held == nil {
				held = map[types.UID]bool{}
			}
			held[m.UID] = true
			continue
		}
		withdrawn[m.UID] = m
	}
	return withdrawn, held
}

// restore puts back in the claim queue the members withdrawn whose delete
// did not happen.
func (r *WarmPoolReconciler) restore(withdrawn map[types.UID]*sandboxv1beta1.Sandbox) {
	if r.Queue == nil {
		return
	}
	for _, m := range withdrawn {
		r.Queue.Restore(m)
	}
}

// run carries out a pool's plan through the executor, its members to
// delete withdrawn from the claim queue already. What depends on carrying
// it out stays here: the expectations of what was created and deleted
// moments ago, creating a run of members concurrently, API errors, and the
// memory of the status and progress events last reported.
func (r *WarmPoolReconciler) run(ctx context.Context, in render.WarmPoolPlanInputs, plan render.Plan, exp *expectations,
	withdrawn map[types.UID]*sandboxv1beta1.Sandbox, pending bool, now time.Time) (reconcile.Result, error) {
	pool := in.Pool
	var held time.Duration
	x := executor{
		engine: r.Engine,
		event: func(s render.Step) {
			r.Recorder.Eventf(pool, nil, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
			switch s.Event.Reason {
			case sandboxv1beta1.EventWarmPoolNotProgressing:
				r.memory.notProgressing.Remember(client.ObjectKeyFromObject(pool), pool.UID, now)
			case sandboxv1beta1.EventWarmPoolProgressing:
				r.memory.notProgressing.Forget(client.ObjectKeyFromObject(pool))
			}
		},
		status: func(ctx context.Context, s render.Step, changes ssa.ChangeSet) (bool, error) {
			if changes.Changed() {
				log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
			}
			desired, ok := s.Object.(*extac.SandboxWarmPoolApplyConfiguration)
			if !ok {
				return true, fmt.Errorf("plan status step holds %T", s.Object)
			}
			if held = r.statusHold(pool, desired, now); held > 0 {
				// Members are on their way back: the counts wait.
				return false, nil
			}
			return false, r.writeStatus(ctx, pool, desired)
		},
		own: func(ctx context.Context, s render.Step) (*ssa.Change, bool, error) {
			if s.Action != render.ActionDelete {
				return nil, true, fmt.Errorf("plan step %s %s %s: not a pool's", s.Action, s.Kind, s.Name)
			}
			c, err := r.deleteMember(ctx, exp, s, now)
			if m, ok := s.Live.(*sandboxv1beta1.Sandbox); ok {
				delete(withdrawn, m.UID)
			}
			return &c, true, err
		},
		create: func(ctx context.Context, s render.Step) (ssa.Change, error) {
			c, err := r.createMember(ctx, in.WarmPoolInputs, exp, s, now)
			if apierrors.IsInvalid(err) {
				err = &invalidMember{err}
			}
			return c, err
		},
		parallel: createParallelism,
	}
	done, err := x.run(ctx, plan)
	r.restore(withdrawn)
	var invalid *invalidMember
	switch {
	case errors.As(err, &invalid):
		// The template renders members the API server refuses: only a
		// template change helps. Report it; do not retry.
		return reconcile.Result{}, terminal(err, r.writeStatus(ctx, pool, render.WarmPoolStatusOnFailure(in, err.Error())))
	case err != nil:
		return reconcile.Result{}, err
	}
	var result reconcile.Result
	if pending || done.created > 0 {
		// If a created member never shows up, look again once the
		// expectation runs out.
		result.RequeueAfter = expectationTTL
	}
	if held > 0 && (result.RequeueAfter == 0 || held < result.RequeueAfter) {
		result.RequeueAfter = held
	}
	if recheck := plan.RecheckAt; recheck != nil {
		if wait := recheck.Sub(now); wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
			result.RequeueAfter = wait
		}
	}
	return result, nil
}

// deleteMember carries out a delete step of a member withdrawn from the
// claim queue, only if it is still exactly the member the plan saw (the
// step's UID and resourceVersion preconditions: a member adopted meanwhile,
// by this or any other controller, is never deleted). A member not deleted
// goes back in the queue.
func (r *WarmPoolReconciler) deleteMember(ctx context.Context, exp *expectations, s render.Step, now time.Time) (ssa.Change, error) {
	m, ok := s.Live.(*sandboxv1beta1.Sandbox)
	if !ok || s.Preconditions == nil {
		return ssa.Change{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name},
			fmt.Errorf("plan step %s %s %s: no member to delete", s.Action, s.Kind, s.Name)
	}
	exp.mu.Lock()
	exp.deleted[m.UID] = now
	exp.mu.Unlock()
	var c ssa.Change
	var err error
	if s.Preconditions.ResourceVersion == "" {
		c = ssa.Change{Kind: s.Kind, Namespace: m.Namespace, Name: m.Name}
		err = fmt.Errorf("deleting %s %s: no resourceVersion to guard the delete with", s.Kind, m.Name)
	} else {
		c, err = execute(ctx, r.Engine, s)
	}
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
		return c, err
	}
	return c, nil
}

// settle reconciles the pool's expectations with what the cache shows: it
// returns the members to plan with (those deleted by us marked as deleting)
// and the names created by us that the cache does not show yet.
func (r *WarmPoolReconciler) settle(ctx context.Context, namespace string, exp *expectations, items []*sandboxv1beta1.Sandbox, now time.Time) ([]*sandboxv1beta1.Sandbox, []string) {
	exp.mu.Lock()
	defer exp.mu.Unlock()
	seen := map[types.UID]bool{}
	members := make([]*sandboxv1beta1.Sandbox, 0, len(items))
	for _, m := range items {
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

// createMember creates one member, expected from now on under its name.
// A name the API server already holds (a Sandbox the cache does not show
// yet) is never reused: the member is rendered again under a new random
// name and created under that (at most maxNameCollisions times), as the
// API server retries a generateName that collided, keeping the
// expectation of a created member under the name it is created by. A member not created is no longer expected. Members render
// alike but for their names, so the one the policies judged stands for it.
func (r *WarmPoolReconciler) createMember(ctx context.Context, in render.WarmPoolInputs, exp *expectations, s render.Step, now time.Time) (ssa.Change, error) {
	exp.mu.Lock()
	exp.created[s.Name] = now
	exp.mu.Unlock()
	for try := 0; ; try++ {
		_, c, exists, err := createSandbox(ctx, r.Engine, s)
		if err == nil && !exists {
			return c, nil
		}
		exp.mu.Lock()
		delete(exp.created, s.Name)
		exp.mu.Unlock()
		if err != nil {
			return c, err
		}
		if try+1 >= maxNameCollisions {
			return c, fmt.Errorf("creating a member of SandboxWarmPool %s: %d names in a row were taken", in.Pool.Name, maxNameCollisions)
		}
		m, err := render.WarmPoolMember(in, render.MemberName(in.Pool.Name, r.suffix()))
		if err != nil {
			return c, err
		}
		s.Name, s.Object = *m.Name, m
		exp.mu.Lock()
		exp.created[s.Name] = now
		exp.mu.Unlock()
	}
}

// Members returns the Sandboxes pool controls (by API group, kind, name
// and UID) as the cache holds them, read from SandboxIndexer when it is
// set: the cache's own objects, not to be changed.
func (r *WarmPoolReconciler) Members(ctx context.Context, pool *extv1beta1.SandboxWarmPool) ([]*sandboxv1beta1.Sandbox, error) {
	return controlledSandboxes(ctx, r.Client, r.SandboxIndexer, pool, extv1beta1.WarmPoolKind)
}
