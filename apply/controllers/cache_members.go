package controllers

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// indexPoolMembers is the informer index of the Sandboxes a warm pool
// controls, by namespace and controller (IndexController's key), which
// PoolMembers reads.
const indexPoolMembers = "agent-sandbox/pool-members"

// PoolMembers reads a warm pool's members straight from the Sandbox
// informer's index: the cache's own objects, read only, where a List copies
// every one into its slice. A pool looks at its members, and a claim at its
// pool's, on every pass; those copies were a quarter of what the
// controller allocated while paced claims took members one by one. Only
// members are filed, so Sandboxes of no pool cost the index nothing. The
// zero value (no informer index) reads with List.
type PoolMembers struct {
	indexer toolscache.Indexer
}

// NewPoolMembers adds the index to informer, the Sandbox informer of the
// cache the reconcilers read. An informer that is not a client-go
// SharedIndexInformer gets none, and List is read instead.
func NewPoolMembers(informer any) (*PoolMembers, error) {
	sii, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return &PoolMembers{}, nil
	}
	err := sii.AddIndexers(toolscache.Indexers{indexPoolMembers: func(obj any) ([]string, error) {
		sb, ok := obj.(*sandboxv1beta1.Sandbox)
		if !ok || extv1beta1.PoolOf(sb) == nil {
			return nil, nil
		}
		return []string{sb.Namespace + "/" + sandboxv1beta1.ControllerKeyOf(sb)}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing warm pool members: %w", err)
	}
	return &PoolMembers{indexer: sii.GetIndexer()}, nil
}

// Of returns the Sandboxes pool controls. They are the cache's own
// objects: never change one (copy it first).
func (s *PoolMembers) Of(ctx context.Context, c client.Reader, pool *extv1beta1.SandboxWarmPool) ([]*sandboxv1beta1.Sandbox, error) {
	if s == nil || s.indexer == nil {
		var list sandboxv1beta1.SandboxList
		if err := c.List(ctx, &list, client.InNamespace(pool.Namespace), controlledBy(pool, extv1beta1.WarmPoolKind), client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out := make([]*sandboxv1beta1.Sandbox, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	objs, err := s.indexer.ByIndex(indexPoolMembers, pool.Namespace+"/"+sandboxv1beta1.ControllerKey(extv1beta1.WarmPoolKind, pool.Name, pool.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*sandboxv1beta1.Sandbox, 0, len(objs))
	for _, o := range objs {
		if sb, ok := o.(*sandboxv1beta1.Sandbox); ok {
			out = append(out, sb)
		}
	}
	return out, nil
}
