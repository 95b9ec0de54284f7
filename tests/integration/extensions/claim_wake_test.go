package extensions

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// TestClaimedSandboxIsWokenByItsClaimsCommit: a warm Sandbox a claim took
// puts its own writes off until its claim is Ready, parked in the warm
// queue with a timer at the take plus 5 s (claimCommitWait) as its only
// bound. The claim informer's event of the commit must wake it: the Pod
// gets the claim's metadata (the Sandbox's first write after the take)
// well before that timer. Were the wake lost, the write would wait for
// the timer. The take's time is our Apply entry's (whole seconds, so the
// timer fires 4 to 5 s after the take; the test gives up half a second
// before the earliest).
func TestClaimedSandboxIsWokenByItsClaimsCommit(t *testing.T) {
	const commitWait = 5 * time.Second // claimCommitWait
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	waitPool(t, ns, "pool", 1)

	create(t, newClaim(ns, "claim", "pool", func(c *extv1beta1.SandboxClaim) {
		c.Spec.AdditionalPodMetadata = sandboxv1beta1.PodMetadata{Labels: map[string]string{"user": "alice"}}
	}))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	sb, err := get(t, ns, claim.Status.Sandbox.Name, &sandboxv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Labels[sandboxv1beta1.LabelLaunchType] != sandboxv1beta1.LaunchTypeWarm {
		t.Skipf("the claim started a Sandbox of its own (%v), not a warm member", sb.Labels)
	}
	taken, ok := sandboxv1beta1.AppliedAt(sb, manager.FieldManager)
	if !ok {
		t.Fatalf("the taken Sandbox has no Apply entry of %s", manager.FieldManager)
	}
	deadline := taken.Add(commitWait)
	for {
		pod, err := get(t, ns, sb.Name, &corev1.Pod{})
		if err == nil && pod.Labels["user"] == "alice" {
			break
		}
		if now := time.Now(); !now.Before(deadline.Add(-500 * time.Millisecond)) {
			t.Fatalf("the Pod still lacked the claim's metadata %s after the take (claim Ready, its Sandbox still parked): "+
				"its claim's commit did not wake it", now.Sub(taken).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
