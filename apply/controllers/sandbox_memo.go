package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// memo is what the reconciler last wrote for one Sandbox. Under load the
// cache lags behind our own writes; deriving status from a stale copy would
// stamp new transition times on conditions we already reported and write
// them again. While the memo is for the same object (UID), status is derived
// from and compared with the memo instead. Only this controller writes a
// Sandbox's status, so the memo is the truth about it; it is dropped when the
// Sandbox goes away, and a restarted controller starts from the cache.
type memo struct {
	uid types.UID
	// at is the time of our last write for the Sandbox or its children.
	at time.Time
	// status is the fingerprint of the status we last applied, empty if none.
	status string
	// reported is that status: its conditions, service and selector.
	reported *sandboxv1beta1.SandboxStatus
	// drift is the Pod template drift last reported in an event.
	drift string
	// podName is the pod-name annotation value last patched ("" removed),
	// at podNameAt: for a while, a cache that has not caught up with the
	// patch does not cause it again.
	podName   string
	podNameAt time.Time
}

// forget drops what this process remembers about a Sandbox that is gone.
func (r *SandboxReconciler) forget(key types.NamespacedName) {
	r.memory.Delete(key)
	for _, kind := range []string{"Pod", "Service", "SandboxStatus"} {
		r.Engine.Forget(kind, key.Namespace, key.Name)
	}
}

// reported returns the conditions last reported for sb: our memo when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reported(sb *sandboxv1beta1.Sandbox) []metav1.Condition {
	return r.reportedStatus(sb).Conditions
}

// reportedStatus returns the status last reported for sb: our memo when we
// have one, else what the cache holds.
func (r *SandboxReconciler) reportedStatus(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.SandboxStatus {
	if m := r.recall(sb); m != nil && m.status != "" {
		return m.reported
	}
	return &sb.Status
}

func (r *SandboxReconciler) recall(sb *sandboxv1beta1.Sandbox) *memo {
	v, ok := r.memory.Load(client.ObjectKeyFromObject(sb))
	if !ok {
		return nil
	}
	m := v.(*memo)
	if m.uid != sb.UID {
		return nil
	}
	return m
}

// remember records a write for sb at a time; status, when not empty, is the
// fingerprint of the status written, reported that status.
func (r *SandboxReconciler) remember(sb *sandboxv1beta1.Sandbox, at time.Time, status string, reported *sandboxv1beta1.SandboxStatus) {
	m := &memo{uid: sb.UID, at: at}
	if prev := r.recall(sb); prev != nil {
		m.status, m.reported, m.drift = prev.status, prev.reported, prev.drift
		m.podName, m.podNameAt = prev.podName, prev.podNameAt
	}
	if status != "" {
		m.status, m.reported = status, reported
	}
	r.memory.Store(client.ObjectKeyFromObject(sb), m)
}

// driftReported records the Pod template drift last reported for sb and
// says whether it is new (an event is due).
func (r *SandboxReconciler) driftReported(sb *sandboxv1beta1.Sandbox, drift string) bool {
	m := r.recall(sb)
	if m == nil {
		m = &memo{uid: sb.UID}
	}
	if m.drift == drift {
		return false
	}
	next := *m
	next.drift = drift
	r.memory.Store(client.ObjectKeyFromObject(sb), &next)
	return drift != ""
}
