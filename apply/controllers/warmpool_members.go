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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

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
		exp.freed[m.Name] = now
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
	for name, at := range exp.freed {
		if now.Sub(at) > nameCooldown {
			delete(exp.freed, name)
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

// cooling reports a member name freed by a delete moments ago.
func (e *expectations) cooling(name string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.freed[name]
	return ok && now.Sub(at) <= nameCooldown
}
