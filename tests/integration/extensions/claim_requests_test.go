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
