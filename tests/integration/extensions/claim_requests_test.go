package extensions

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWarmClaimWritesItsBindingOnce: a claim served from a Ready pool costs
// one write of its annotations and one of its status, however many times
// it is reconciled while the cache catches up with those writes (its
// adopted Sandbox's and Pod's events come first).
func TestWarmClaimWritesItsBindingOnce(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 3))
	waitPool(t, ns, "pool", 3)
	for _, name := range []string{"a", "b", "c"} {
		create(t, newClaim(ns, name, "pool"))
	}
	for _, name := range []string{"a", "b", "c"} {
		waitClaim(t, ns, name, metav1.ConditionTrue, "")
	}
	// The reconciles that follow the binding (the adopted Sandbox's and
	// its Pod's labels, the claim's own writes) are over in well under
	// this.
	time.Sleep(2 * time.Second)
	for _, name := range []string{"a", "b", "c"} {
		if n := running.RequestsTo(http.MethodPatch, ns, "sandboxclaims/"+name); n != 1 {
			t.Errorf("claim %s: %d writes of its annotations, want 1", name, n)
		}
		if n := running.RequestsTo(http.MethodPatch, ns, "sandboxclaims/"+name+"/status"); n != 1 {
			t.Errorf("claim %s: %d writes of its status, want 1", name, n)
		}
	}
}

// TestRefillAfterAClaimHoldsThePoolsCounts: a claim takes a member and the
// pool makes another; the counts in between (a member fewer, one not
// Ready yet) are not written while the pool gets back to its size within
// the status hold (1 s), so the pool's status is back as it was with no
// write at all, and a slower refill writes once per hold at most, plus
// the pool full again.
func TestRefillAfterAClaimHoldsThePoolsCounts(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 3))
	before, _ := waitPool(t, ns, "pool", 3)
	// The pool's own writes while it filled are over.
	time.Sleep(time.Second)
	writes := running.RequestsTo(http.MethodPatch, ns, "sandboxwarmpools/pool/status")
	start := time.Now()
	create(t, newClaim(ns, "a", "pool"))
	waitClaim(t, ns, "a", metav1.ConditionTrue, "")
	after, members := waitPool(t, ns, "pool", 3)
	took := time.Since(start)
	time.Sleep(2 * time.Second) // any write still to come comes
	n := running.RequestsTo(http.MethodPatch, ns, "sandboxwarmpools/pool/status") - writes
	t.Logf("claim and refill (%v) took %v; %d writes of the pool's status", names(members), took, n)
	switch most := int64(took / time.Second); {
	case took < time.Second && n != 0:
		t.Errorf("the pool was full again after %v and its status was written %d times, want 0", took, n)
	case n > most+1:
		t.Errorf("the pool was full again after %v and its status was written %d times, want %d at most", took, n, most+1)
	}
	if after.Status.ReadyReplicas != before.Status.ReadyReplicas || after.Status.Replicas != before.Status.Replicas {
		t.Errorf("status after the refill %+v, want the counts of %+v", after.Status, before.Status)
	}
}
