package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// annotate carries out an annotate step: an apply of the step's annotations,
// and nothing else, under the engine's annotation manager (under the main
// field manager, an apply of only these would give up, and so remove,
// everything else it applied), guarded by the object's UID in the apply
// configuration (and by a resourceVersion, when the step carries one). It
// is forced: these annotations are the controller's record, which upstream
// writes whatever held them, as the merge patch this replaces did. An
// annotation the step removes goes only once no manager holds it: one our
// main field manager holds (an adoption set it, or an older controller's
// patch) is released by it too (releaseAnnotations).
func annotate(ctx context.Context, e *ssa.Engine, s render.Step) (ssa.Change, error) {
	opts := ssa.Options{Force: true, Manager: e.AnnotationManager()}
	switch ac := s.Object.(type) {
	case *sandboxac.SandboxApplyConfiguration:
		c, err := ssa.Apply(ctx, e, s.Kind, ac, liveAs[*sandboxv1beta1.Sandbox](s.Live), sandboxac.ExtractSandbox, opts)
		if err != nil || len(s.Remove) == 0 {
			return c, err
		}
		if live, ok := s.Live.(client.Object); ok && !holdsAnyAnnotation(live, e.FieldManager(), s.Remove) {
			// As the cache shows it, our main manager holds none of them:
			// nothing to release, and no read. Should the cache be behind
			// a write that gave it one, the annotation is still there at
			// the next reconcile, which plans its removal again.
			return c, nil
		}
		return c, releaseAnnotations(ctx, e, s, s.Remove)
	case *extac.SandboxClaimApplyConfiguration:
		return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*extv1beta1.SandboxClaim](s.Live), extac.ExtractSandboxClaim, opts)
	}
	return ssa.Change{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name},
		fmt.Errorf("annotate step on %s %s holds %T", s.Kind, s.Name, s.Object)
}

// holdsAnyAnnotation reports whether manager's entries (Apply or Update,
// the object itself) on o own one of the annotations keys.
func holdsAnyAnnotation(o client.Object, manager string, keys []string) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager != manager || m.Subresource != "" || m.FieldsV1 == nil {
			continue
		}
		owned := &fieldpath.Set{}
		if err := owned.FromJSON(m.FieldsV1.GetRawReader()); err != nil {
			return true // cannot tell: look
		}
		for _, k := range keys {
			if owned.Has(fieldpath.MakePathOrDie("metadata", "annotations", k)) {
				return true
			}
		}
	}
	return false
}

// releaseAnnotations has our main field manager give up the annotations
// keys of the Sandbox the step names, when it still holds them after the
// annotation manager gave them up: the Sandbox is read again, an Update
// entry of ours is upgraded to our Apply entry (csaupgrade), and what that
// entry owns is applied again without the keys, guarded by the UID and
// resourceVersion read. An annotation another manager holds stays: it is
// theirs.
func releaseAnnotations(ctx context.Context, e *ssa.Engine, s render.Step, keys []string) error {
	sb := &sandboxv1beta1.Sandbox{}
	if err := e.Reader().Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, sb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live, ok := s.Live.(client.Object); ok && live.GetUID() != sb.UID {
		return nil // a namesake: not the Sandbox the step is about
	}
	held := false
	for _, k := range keys {
		if _, ok := sb.Annotations[k]; ok {
			held = true
		}
	}
	if !held {
		return nil
	}
	if _, err := e.UpgradeOwnership(ctx, s.Kind, sb); err != nil {
		return err
	}
	owned, err := sandboxac.ExtractSandbox(sb, e.FieldManager())
	if err != nil {
		return fmt.Errorf("extracting the fields %s owns of Sandbox %s: %w", e.FieldManager(), sb.Name, err)
	}
	drop := false
	for _, k := range keys {
		if _, ok := owned.Annotations[k]; ok {
			delete(owned.Annotations, k)
			drop = true
		}
	}
	if !drop {
		return nil
	}
	owned.WithUID(sb.UID).WithResourceVersion(sb.ResourceVersion)
	_, err = ssa.Apply(ctx, e, s.Kind, owned, sb, sandboxac.ExtractSandbox, ssa.Options{})
	return err
}
