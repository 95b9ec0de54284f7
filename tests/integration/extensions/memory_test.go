package extensions

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// remembered is what the controllers remember of objects in ns: the
// reconcilers' memories and the engine's.
func remembered(ns string) map[string]int {
	x := running.Extensions
	return map[string]int{
		"sandbox": running.Sandbox.Remembered(ns), "claim": x.Claims.Remembered(ns),
		"pool": x.WarmPools.Remembered(ns), "template": x.Templates.Remembered(ns),
		"engine": running.Engine.Remembered(ns),
	}
}

// claimFromPool binds a claim ("claim") from a warm pool ("pool", of
// size Ready members, from template "tpl") in a namespace of its own,
// which it returns.
func claimFromPool(t *testing.T, size int) string {
	t.Helper()
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", int32(size)))
	waitPool(t, ns, "pool", size)
	create(t, newClaim(ns, "claim", "pool"))
	waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	return ns
}

// TestMemoryOfDeletedObjectsGoes binds a claim from a warm pool, then
// deletes every object: what the reconcilers and the engine remember of
// them (statuses, a binding, annotations, expectations, extractions) goes
// with them, so memory does not grow with the objects a cluster has seen.
func TestMemoryOfDeletedObjectsGoes(t *testing.T) {
	ns := claimFromPool(t, 1)
	for what, n := range remembered(ns) {
		if n == 0 && what != "template" {
			t.Errorf("the %s memory holds nothing of a bound claim's namespace", what)
		}
	}

	ctx := ctxFor(t)
	for _, o := range []client.Object{
		&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"}},
		&extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}},
		&extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"}},
	} {
		if err := env.Client.Delete(ctx, o); err != nil {
			t.Fatalf("deleting %s: %v", o.GetName(), err)
		}
	}
	// envtest runs no garbage collector: the Sandboxes go by hand.
	if err := env.Client.DeleteAllOf(ctx, &sandboxv1beta1.Sandbox{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing remembered of deleted objects", func() error {
		for what, n := range remembered(ns) {
			if n != 0 {
				return fmt.Errorf("the %s memory holds %d entries: %v", what, n, remembered(ns))
			}
		}
		return nil
	})
}

// TestWritesAreForgottenOnceShown fills a warm pool and binds a claim:
// once the cache shows what was written (members, their Pods and pod-name
// annotations, the statuses, the claim's binding), the engine remembers
// none of those writes, so its memory of writes holds what is in flight,
// not every object written in the last minute.
func TestWritesAreForgottenOnceShown(t *testing.T) {
	ns := claimFromPool(t, 3)
	waitPool(t, ns, "pool", 3)
	eventually(t, "no write remembered once the cache shows it", func() error {
		if n := running.Engine.InFlight(ns); n != 0 {
			return fmt.Errorf("the engine remembers %d writes in %s", n, ns)
		}
		return nil
	})
}
