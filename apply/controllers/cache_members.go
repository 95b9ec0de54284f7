package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// fieldIndexName and namespacedIndexKey are how controller-runtime's cache
// names the informer index a field index is kept in (IndexField) and
// files an object under it in its namespace (its internal FieldIndexName
// and KeyToNamespacedKey). TestPoolMembersFromTheIndexMatchTheList
// (tests/integration/extensions) holds them to the cache's List.
func fieldIndexName(field string) string         { return "field:" + field }
func namespacedIndexKey(ns, value string) string { return ns + "/" + value }

// controlledSandboxes returns the Sandboxes in owner's namespace that owner
// (of kind gk) controls, by IndexController, as the cache holds them: they
// are the cache's own objects, read only. With an indexer they are read
// straight from it. A List, even one that does not deep-copy, copies each
// Sandbox's 1 KiB struct into the list it returns: the pool's and the
// claims' look at a pool's members on every claim was a tenth of what the
// controller allocated while claims took members next to 20,000
// Sandboxes. The index is read without waiting for the informer's sync,
// as a List would wait: both callers' controllers watch Sandboxes, so
// their workers start only once it has synced. Without an indexer (a
// reconciler made without an informer, as some tests do) the reader lists
// them.
func controlledSandboxes(ctx context.Context, c client.Reader, indexer toolscache.Indexer, owner client.Object, gk schema.GroupKind) ([]*sandboxv1beta1.Sandbox, error) {
	if indexer == nil {
		var list sandboxv1beta1.SandboxList
		if err := c.List(ctx, &list, client.InNamespace(owner.GetNamespace()), controlledBy(owner, gk), client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out := make([]*sandboxv1beta1.Sandbox, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	key := sandboxv1beta1.ControllerKey(gk, owner.GetName(), owner.GetUID())
	objs, err := indexer.ByIndex(fieldIndexName(IndexController), namespacedIndexKey(owner.GetNamespace(), key))
	if err != nil {
		return nil, err
	}
	out := make([]*sandboxv1beta1.Sandbox, 0, len(objs))
	for _, o := range objs {
		sb, ok := o.(*sandboxv1beta1.Sandbox)
		if !ok {
			return nil, fmt.Errorf("the Sandbox index holds a %T", o)
		}
		out = append(out, sb)
	}
	return out, nil
}
