package extensions

import (
	"fmt"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/tests/manager"
)

// The running pool reconciler reads a pool's members straight from the
// Sandbox informer's index (SandboxIndexer), uncopied; a reconciler
// without it lists them from the same cache. Both give the pool's own
// members and nothing else: not a Sandbox whose controller reference has
// the pool's name and UID under another API group, nor one in another
// namespace that names the pool's group, kind, name and UID. A change of
// how controller-runtime names or keys its field indexes fails here
// (the index read returns an error), not in production.
func TestPoolMembersFromTheIndexMatchTheList(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 2))
	pool, members := waitPool(t, ns, "pool", 2)

	for _, fake := range []*sandboxv1beta1.Sandbox{
		forged(ns, "forged-group", &members[0], "evil.example.com/v1", "SandboxWarmPool", pool),
		forged(other, "forged-namespace", &members[0], extv1beta1.GroupVersion.String(), "SandboxWarmPool", pool),
	} {
		if err := env.Client.Create(ctxFor(t), fake, client.FieldOwner(manager.FieldManager)); err != nil {
			t.Fatal(err)
		}
	}
	indexed := running.Extensions.WarmPools
	if indexed.SandboxIndexer == nil {
		t.Fatal("the running pool reconciler reads its members by List, not from the index")
	}
	listed := &controllers.WarmPoolReconciler{Client: running.Sandbox.Client}
	want := names(members)
	eventually(t, "both reads give the pool's own members", func() error {
		// The forged Sandboxes are in the cache once the Sandbox
		// reconciler has seen them.
		for _, key := range []client.ObjectKey{{Namespace: ns, Name: "forged-group"}, {Namespace: other, Name: "forged-namespace"}} {
			if err := running.Sandbox.Client.Get(ctxFor(t), key, &sandboxv1beta1.Sandbox{}); err != nil {
				return err
			}
		}
		for what, r := range map[string]*controllers.WarmPoolReconciler{"index": indexed, "list": listed} {
			got, err := r.Members(ctxFor(t), pool)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			var gotNames []string
			for _, sb := range got {
				gotNames = append(gotNames, sb.Name)
			}
			slices.Sort(gotNames)
			if !slices.Equal(gotNames, want) {
				return fmt.Errorf("%s: members %v, want %v", what, gotNames, want)
			}
		}
		return nil
	})
}
