package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// The status writer is the one way the reconcilers write status: it skips a
// status this process wrote last (the cache lags behind our own writes;
// only the controller writes these statuses, so what it wrote last is the
// truth until the object goes away, or the process restarts and starts over
// from the cache), applies the rest through the engine (ssa.ApplyStatus,
// which skips what the status field manager owns already), and remembers
// what it wrote, per object, in the reconciler's statusMemo: the digest of
// the status, the resourceVersion the write produced, and what the
// reconciler keeps of it (the conditions reported, so that transition times
// are not stamped anew from a stale copy).

// statusKind tells the status writer about the status of one kind, and
// what the reconciler keeps of a status it wrote (R).
type statusKind[O client.Object, AC ssa.ApplyConfiguration, R any] struct {
	kind    string
	extract func(O, string) (AC, error)
	// intent is what of a desired status is compared with what was last
	// written; nil for all of it.
	intent func(AC) any
}

var (
	// A Sandbox's status is kept as reported: its conditions, service and
	// selector.
	sandboxStatus = statusKind[*sandboxv1beta1.Sandbox, *sandboxac.SandboxApplyConfiguration, *sandboxv1beta1.SandboxStatus]{
		kind: "Sandbox", extract: sandboxac.ExtractSandboxStatus,
	}
	claimStatus = statusKind[*extv1beta1.SandboxClaim, *extac.SandboxClaimApplyConfiguration, []metav1.Condition]{
		kind: "SandboxClaim", extract: extac.ExtractSandboxClaimStatus,
		// A binding's commit carries the claim's resourceVersion as its
		// guard: the status alone is what is written.
		intent: func(ac *extac.SandboxClaimApplyConfiguration) any { return ac.Status },
	}
	poolStatus = statusKind[*extv1beta1.SandboxWarmPool, *extac.SandboxWarmPoolApplyConfiguration, []metav1.Condition]{
		kind: "SandboxWarmPool", extract: extac.ExtractSandboxWarmPoolStatus,
	}
)

// statusRecord is what a reconciler remembers of a status it wrote.
type statusRecord[R any] struct {
	// intent is the digest of what was written (statusKind.intent).
	intent string
	// resourceVersion is the one our write produced (or a later write of
	// ours, rememberVersion), empty when unknown.
	resourceVersion string
	// at is when it was written.
	at time.Time
	// reported is what the reconciler keeps of the status.
	reported R
}

// statusMemo is a reconciler's memory of the statuses it wrote, per object.
type statusMemo[R any] = ssa.Memo[types.NamespacedName, statusRecord[R]]

// statusWriter is where the status writer writes and remembers: a
// reconciler's engine, memory of statuses and clock.
type statusWriter[R any] struct {
	engine *ssa.Engine
	memory *statusMemo[R]
	clock  clock.PassiveClock
}

// statusWrite is one write of a status.
type statusWrite[R any] struct {
	// reported is what the reconciler keeps of the status.
	reported R
	// always sends the status even when it is what we wrote last (a
	// claim's binding commit, guarded by the claim's resourceVersion).
	always bool
}

// recall is what was last written of o's status, if this process wrote it.
func (k statusKind[O, AC, R]) recall(m *statusMemo[R], o O) (statusRecord[R], bool) {
	return m.Recall(client.ObjectKeyFromObject(o), o.GetUID())
}

// previous returns what was kept of the status last written for o, or the
// zero R (nil: use o's own) when this process did not write it.
func (k statusKind[O, AC, R]) previous(m *statusMemo[R], o O) R {
	r, _ := k.recall(m, o)
	return r.reported
}

// statusOutcome is what a status write did.
type statusOutcome int

const (
	// statusRemembered: not sent, it is what we wrote last.
	statusRemembered statusOutcome = iota
	// statusOwned: not sent, the status field manager owns it already.
	statusOwned
	// statusWritten: sent, and it changed the status.
	statusWritten
	// statusGone: the object was deleted meanwhile; its status is moot,
	// and its deletion brings a new event.
	statusGone
)

// digest is what a status write of desired is remembered by.
func (k statusKind[O, AC, R]) digest(desired AC) string {
	var intent any = desired
	if k.intent != nil {
		intent = k.intent(desired)
	}
	return ssa.IntentOf(intent)
}

// remembered reports that desired is the status this process wrote last
// for o.
func (k statusKind[O, AC, R]) remembered(m *statusMemo[R], o O, desired AC) bool {
	last, ok := k.recall(m, o)
	return ok && last.intent == k.digest(desired)
}

// write applies desired to o's status unless it is what this process wrote
// last, and remembers it.
func (k statusKind[O, AC, R]) write(ctx context.Context, w statusWriter[R], o O, desired AC, sw statusWrite[R]) (statusOutcome, error) {
	digest := k.digest(desired)
	if last, ok := k.recall(w.memory, o); ok && !sw.always && last.intent == digest {
		// Already written by us; the cache has not caught up yet.
		w.engine.SavedStatus(k.kind, o.GetNamespace(), o.GetName())
		return statusRemembered, nil
	}
	change, err := ssa.ApplyStatus(ctx, w.engine, k.kind, desired, o, k.extract)
	switch {
	case apierrors.IsNotFound(err):
		return statusGone, nil
	case err != nil:
		return statusOwned, err
	case change.Action == ssa.Unchanged:
		return statusOwned, nil
	}
	rec := statusRecord[R]{intent: digest, at: w.clock.Now(), reported: sw.reported}
	if last, ok := w.engine.LastStatusWrite(k.kind, change.Namespace, change.Name); ok {
		rec.resourceVersion = last.ResourceVersion
	}
	w.memory.Remember(client.ObjectKeyFromObject(o), o.GetUID(), rec)
	return statusWritten, nil
}

// rememberVersion records the resourceVersion a later write of ours (the
// claim's annotations) gave o, when its status is remembered.
func (k statusKind[O, AC, R]) rememberVersion(m *statusMemo[R], o O, rv string) {
	if r, ok := k.recall(m, o); ok && rv != "" {
		r.resourceVersion = rv
		m.Remember(client.ObjectKeyFromObject(o), o.GetUID(), r)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// conditionsOf copies the conditions of a status apply configuration.
func conditionsOf(in []metav1ac.ConditionApplyConfiguration) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(in))
	for _, c := range in {
		out = append(out, metav1.Condition{
			Type: *c.Type, Status: *c.Status, Reason: *c.Reason, Message: *c.Message,
			ObservedGeneration: *c.ObservedGeneration, LastTransitionTime: *c.LastTransitionTime,
		})
	}
	return out
}
