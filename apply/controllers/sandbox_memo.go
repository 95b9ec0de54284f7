package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// What the Sandbox reconciler remembers of each Sandbox, in its memory,
// besides the status it last wrote (sandboxStatus, whose record keeps the
// status as reported: its conditions, service and selector). Under load the
// cache lags behind our own writes; deriving status from a stale copy would
// stamp new transition times on conditions we already reported and write
// them again. While a record is for the same object (UID), status is
// derived from and compared with it instead. Only this controller writes a
// Sandbox's status, so the record is the truth about it; everything is
// dropped when the Sandbox goes away, and a restarted controller starts
// from the cache.
const (
	// sandboxPodName: the pod-name annotation value last patched (Intent,
	// "" removed), at At. For a while, a cache that has not caught up with
	// the patch does not cause it again.
	sandboxPodName = "SandboxPodName"
	// sandboxChildren: when the plan's steps last changed the Sandbox's
	// children (At).
	sandboxChildren = "SandboxChildren"
	// sandboxDrift: the Pod template drift last reported in an event
	// (Intent).
	sandboxDrift = "SandboxDriftEvent"
)

// forget drops what this process remembers about a Sandbox that is gone.
func (r *SandboxReconciler) forget(key types.NamespacedName, _ *sandboxv1beta1.Sandbox) {
	r.backlog.done(key)
	for _, kind := range []string{sandboxPodName, sandboxChildren, sandboxDrift, "SandboxStatus"} {
		r.memory.Forget(ssa.Key{Kind: kind, Namespace: key.Namespace, Name: key.Name})
	}
	for _, kind := range []string{"Pod", "Service", "NetworkPolicy", "Sandbox", "SandboxStatus"} {
		r.Engine.Forget(kind, key.Namespace, key.Name)
	}
}

// statuses is where the Sandbox reconciler's status writer writes.
func (r *SandboxReconciler) statuses() statusWriter {
	return statusWriter{engine: r.Engine, memory: &r.memory, clock: r.Clock}
}

// reported returns the conditions last reported for sb: our memory when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reported(sb *sandboxv1beta1.Sandbox) []metav1.Condition {
	return r.reportedStatus(sb).Conditions
}

// reportedStatus returns the status last reported for sb: our memory when
// we have one, else what the cache holds.
func (r *SandboxReconciler) reportedStatus(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.SandboxStatus {
	if m, ok := sandboxStatus.recall(&r.memory, sb); ok {
		if s, ok := m.State.(*sandboxv1beta1.SandboxStatus); ok {
			return s
		}
	}
	return &sb.Status
}

// lastWrite is the time of our last write for sb (its status) or its
// children, zero if none.
func (r *SandboxReconciler) lastWrite(sb *sandboxv1beta1.Sandbox) time.Time {
	var last time.Time
	if m, ok := sandboxStatus.recall(&r.memory, sb); ok {
		last = m.At
	}
	if m, ok := r.memory.Recall(ssa.KeyOf(sandboxChildren, sb), sb.UID); ok && m.At.After(last) {
		last = m.At
	}
	return last
}

// changedChildren records that the plan's steps changed sb's children at a
// time.
func (r *SandboxReconciler) changedChildren(sb *sandboxv1beta1.Sandbox, at time.Time) {
	r.memory.Remember(ssa.KeyOf(sandboxChildren, sb), ssa.Record{UID: sb.UID, At: at})
}

// driftReported records the Pod template drift last reported for sb and
// says whether it is new (an event is due).
func (r *SandboxReconciler) driftReported(sb *sandboxv1beta1.Sandbox, drift string) bool {
	k := ssa.KeyOf(sandboxDrift, sb)
	if m, _ := r.memory.Recall(k, sb.UID); m.Intent == drift {
		return false
	}
	r.memory.Remember(k, ssa.Record{UID: sb.UID, Intent: drift})
	return drift != ""
}
