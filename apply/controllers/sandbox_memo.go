package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// sandboxMemory is what the Sandbox reconciler remembers of each Sandbox
// besides the cache. Under load the cache lags behind our own writes;
// deriving status from a stale copy would stamp new transition times on
// conditions we already reported and write them again. While a value is for
// the same object (UID), status is derived from and compared with it
// instead. Only this controller writes a Sandbox's status, so the memory is
// the truth about it; everything is dropped when the Sandbox goes away
// (forget), and a restarted controller starts from the cache.
type sandboxMemory struct {
	// status is the status last written, as reported (sandboxStatus).
	status statusMemo[*sandboxv1beta1.SandboxStatus]
	// podName is the pod-name annotation value last patched ("" removed),
	// and when. For a while, a cache that has not caught up with the
	// patch does not cause it again; forgotten once the cache shows it.
	podName objectMemo[sent]
	// children is when the plan's steps last changed the Sandbox's
	// children.
	children objectMemo[time.Time]
	// drift is the Pod template drift last reported in an event.
	drift objectMemo[string]
}

// forget drops what this process remembers about a Sandbox that is gone.
func (r *SandboxReconciler) forget(key types.NamespacedName, _ *sandboxv1beta1.Sandbox) {
	r.backlog.done(key)
	r.memory.status.Forget(key)
	r.memory.podName.Forget(key)
	r.memory.children.Forget(key)
	r.memory.drift.Forget(key)
	for _, kind := range []string{"Pod", "Service", "NetworkPolicy", "Sandbox"} {
		r.Engine.Forget(kind, key.Namespace, key.Name)
	}
	// The namespace's default-deny NetworkPolicy stays, but what is
	// remembered of it goes with any of its Sandboxes, so that nothing is
	// remembered of a namespace without them; the next plan of another
	// compares it again (one extraction).
	r.Engine.Forget("NetworkPolicy", key.Namespace, render.NamespaceNetworkPolicyName)
}

// statuses is where the Sandbox reconciler's status writer writes.
func (r *SandboxReconciler) statuses() statusWriter[*sandboxv1beta1.SandboxStatus] {
	return statusWriter[*sandboxv1beta1.SandboxStatus]{engine: r.Engine, memory: &r.memory.status, clock: r.Clock}
}

// reported returns the conditions last reported for sb: our memory when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reported(sb *sandboxv1beta1.Sandbox) []metav1.Condition {
	return r.reportedStatus(sb).Conditions
}

// reportedStatus returns the status last reported for sb: our memory when
// we have one, else what the cache holds.
func (r *SandboxReconciler) reportedStatus(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.SandboxStatus {
	if s := sandboxStatus.previous(&r.memory.status, sb); s != nil {
		return s
	}
	return &sb.Status
}

// lastWrite is the time of our last write for sb (its status) or its
// children, zero if none.
func (r *SandboxReconciler) lastWrite(sb *sandboxv1beta1.Sandbox) time.Time {
	var last time.Time
	if m, ok := sandboxStatus.recall(&r.memory.status, sb); ok {
		last = m.at
	}
	if at, ok := r.memory.children.Recall(client.ObjectKeyFromObject(sb), sb.UID); ok && at.After(last) {
		last = at
	}
	return last
}

// changedChildren records that the plan's steps changed sb's children at a
// time, which is progress in a burst.
func (r *SandboxReconciler) changedChildren(sb *sandboxv1beta1.Sandbox, at time.Time) {
	r.memory.children.Remember(client.ObjectKeyFromObject(sb), sb.UID, at)
	r.backlog.changed(r.StatusCoalesceWindow, at)
}

// driftReported records the Pod template drift last reported for sb and
// says whether it is new (an event is due).
func (r *SandboxReconciler) driftReported(sb *sandboxv1beta1.Sandbox, drift string) bool {
	k := client.ObjectKeyFromObject(sb)
	if last, _ := r.memory.drift.Recall(k, sb.UID); last == drift {
		return false
	}
	r.memory.drift.Remember(k, sb.UID, drift)
	return drift != ""
}
