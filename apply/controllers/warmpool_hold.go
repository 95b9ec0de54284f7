package controllers

import (
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
)

// statusHold says how long to put off writing desired, a pool's status,
// because the pool is on its way back to full: every claim takes a member
// and the pool makes another, and reporting each step (a member fewer,
// one more not Ready, Ready again) is three status writes per claim for
// the API server, which the claims share it with, while nobody needs the
// steps in between. It holds a status that differs from the one the pool
// shows only in its counts (replicas, readyReplicas, and the Ready
// condition between WarmPoolReady and WarmPoolNotReady), while fewer
// members than wanted are Ready and none is too many, for StatusHold
// after the first status held at most; zero means write now. Anything
// else (a new generation, a problem, a pool that reaches or passes its
// size, the first status) is written at once, and a status the pool is
// back to by then is not written at all.
func (r *WarmPoolReconciler) statusHold(pool *extv1beta1.SandboxWarmPool, desired *extac.SandboxWarmPoolApplyConfiguration, now time.Time) time.Duration {
	key := client.ObjectKeyFromObject(pool)
	if r.StatusHold <= 0 || !countsOnly(pool, desired) {
		r.memory.statusHeldSince.Forget(key)
		return 0
	}
	return holdLeft(&r.memory.statusHeldSince, pool, r.StatusHold, now)
}

// holdLeft is what is left of a hold of a pool that lasts limit from when
// it began (remembered in since: now, when it begins now); zero, and
// forgotten, once it has run out.
func holdLeft(since *objectMemo[time.Time], pool *extv1beta1.SandboxWarmPool, limit time.Duration, now time.Time) time.Duration {
	key := client.ObjectKeyFromObject(pool)
	began, ok := since.Recall(key, pool.UID)
	if !ok {
		began = now
		since.Remember(key, pool.UID, began)
	}
	if left := began.Add(limit).Sub(now); left > 0 {
		return left
	}
	since.Forget(key)
	return 0
}

// countsOnly reports that desired, a pool's status, differs from the one
// the pool shows only in its member counts, and that the pool is growing
// towards its size (fewer Ready than wanted, no more members than
// wanted).
func countsOnly(pool *extv1beta1.SandboxWarmPool, desired *extac.SandboxWarmPoolApplyConfiguration) bool {
	st, shown := desired.Status, pool.Status
	if st == nil || ptr.Deref(st.ObservedGeneration, 0) != shown.ObservedGeneration ||
		ptr.Deref(st.Selector, "") != shown.Selector {
		return false
	}
	want := int32(1)
	if pool.Spec.Replicas != nil {
		want = *pool.Spec.Replicas
	}
	if ready, replicas := ptr.Deref(st.ReadyReplicas, 0), ptr.Deref(st.Replicas, 0); ready >= want || replicas > want {
		return false
	}
	counted := []string{extv1beta1.ReasonWarmPoolReady, extv1beta1.ReasonWarmPoolNotReady}
	if len(st.Conditions) != len(shown.Conditions) {
		return false
	}
	for _, c := range st.Conditions {
		was := apimeta.FindStatusCondition(shown.Conditions, ptr.Deref(c.Type, ""))
		switch {
		case was == nil:
			return false
		case was.Type == extv1beta1.ConditionReady:
			if !slices.Contains(counted, was.Reason) || !slices.Contains(counted, ptr.Deref(c.Reason, "")) {
				return false
			}
		case was.Status != ptr.Deref(c.Status, metav1.ConditionUnknown) || was.Reason != ptr.Deref(c.Reason, "") ||
			was.Message != ptr.Deref(c.Message, ""):
			return false
		}
	}
	return true
}
