package render

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestWarmPoolUnschedulable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	member := func(age time.Duration, conds ...metav1.Condition) *sandboxv1beta1.Sandbox {
		return &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status:     sandboxv1beta1.SandboxStatus{Conditions: conds},
		}
	}
	unschedulable := metav1.Condition{Type: sandboxv1beta1.ConditionPodScheduled, Status: metav1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	pending := metav1.Condition{Type: sandboxv1beta1.ConditionPodScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}
	members := []*sandboxv1beta1.Sandbox{
		member(10*time.Minute, unschedulable), // held: counted
		member(time.Minute, unschedulable),    // within the grace period
		member(10*time.Minute, pending),       // scheduled, not Ready: upstream replaces it, no event
	}
	if got := WarmPoolUnschedulable(members, 5*time.Minute, now); got != 1 {
		t.Errorf("WarmPoolUnschedulable = %d, want 1", got)
	}
	want := "1/3 sandboxes are unschedulable past the 5m0s readiness grace period; holding them instead of replacing (replacements would be equally unschedulable)"
	if got := WarmPoolNotProgressingMessage(1, 3, 5*time.Minute); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
