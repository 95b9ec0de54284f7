package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// what it wrote, per object, in the reconciler's ssa.Memory: the digest of
// the status, the resourceVersion the write produced, and what the
// reconciler keeps of it (the conditions reported, so that transition times
// are not stamped anew from a stale copy).

// statusKind tells the status writer about the status of one kind.
type statusKind[O client.Object, AC ssa.ApplyConfiguration] struct {
	kind    string
	extract func(O, string) (AC, error)
	// intent is what of a desired status is compared with what was last
	// written; nil for all of it.
	intent func(AC) any
}

var (
	sandboxStatus = statusKind[*sandboxv1beta1.Sandbox, *sandboxac.SandboxApplyConfiguration]{
		kind: "Sandbox", extract: sandboxac.ExtractSandboxStatus,
	}
	claimStatus = statusKind[*extv1beta1.SandboxClaim, *extac.SandboxClaimApplyConfiguration]{
		kind: "SandboxClaim", extract: extac.ExtractSandboxClaimStatus,
		// A binding's commit carries the claim's resourceVersion as its
		// guard: the status alone is what is written.
		intent: func(ac *extac.SandboxClaimApplyConfiguration) any { return ac.Status },
	}
	poolStatus = statusKind[*extv1beta1.SandboxWarmPool, *extac.SandboxWarmPoolApplyConfiguration]{
		kind: "SandboxWarmPool", extract: extac.ExtractSandboxWarmPoolStatus,
	}
)

// statusWriter is where the status writer writes and remembers: a
// reconciler's engine, memory and clock.
type statusWriter struct {
	engine *ssa.Engine
	memory *ssa.Memory
	clock  clock.PassiveClock
}

// statusWrite is one write of a status.
type statusWrite struct {
	// reported is what the reconciler keeps of the status (Record.State).
	reported any
	// always sends the status even when it is what we wrote last (a
	// claim's binding commit, guarded by the claim's resourceVersion).
	always bool
}

func (k statusKind[O, AC]) key(o client.Object) ssa.Key { return ssa.KeyOf(k.kind+"Status", o) }

// recall is what was last written of o's status, if this process wrote it.
func (k statusKind[O, AC]) recall(m *ssa.Memory, o O) (ssa.Record, bool) {
	return m.Recall(k.key(o), o.GetUID())
}

// previous returns the conditions last written for o, or nil to use o's own.
func (k statusKind[O, AC]) previous(m *ssa.Memory, o O) []metav1.Condition {
	r, ok := k.recall(m, o)
	if !ok {
		return nil
	}
	c, _ := r.State.([]metav1.Condition)
	return c
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

// write applies desired to o's status unless it is what this process wrote
// last, and remembers it.
func (k statusKind[O, AC]) write(ctx context.Context, w statusWriter, o O, desired AC, sw statusWrite) (statusOutcome, error) {
	key := k.key(o)
	var intent any = desired
	if k.intent != nil {
		intent = k.intent(desired)
	}
	digest := ssa.IntentOf(intent)
	if !sw.always && w.memory.Holds(key, o.GetUID(), digest) {
		// Already written by us; the cache has not caught up yet.
		w.engine.Saved(key.Kind, key.Namespace, key.Name)
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
	rec := ssa.Record{UID: o.GetUID(), Intent: digest, At: w.clock.Now(), State: sw.reported}
	if last, ok := w.engine.LastWrite(change); ok {
		rec.ResourceVersion = last.ResourceVersion
	}
	w.memory.Remember(key, rec)
	return statusWritten, nil
}

// rememberVersion records the resourceVersion a later write of ours (the
// claim's annotations) gave o, when its status is remembered.
func (k statusKind[O, AC]) rememberVersion(m *ssa.Memory, o O, rv string) {
	if r, ok := k.recall(m, o); ok && rv != "" {
		r.ResourceVersion = rv
		m.Remember(k.key(o), r)
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
