package ssa

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnUpdates moves into our Apply entry the fields that the Update entries
// of managers hold on obj: what a Create by our field manager recorded (a
// create, which must fail when the object exists, cannot be an apply), or
// what earlier writers of an object that is ours alone set. Later applies
// then own those fields, and remove those they no longer set. obj is the
// object as last read; the result is read back into it. The patch
// (client-go's csaupgrade) carries obj's resourceVersion as its
// precondition: a Conflict (apierrors.IsConflict) means obj changed since.
// Nothing is sent when there is nothing to move.
func (e *Engine) OwnUpdates(ctx context.Context, kind string, obj client.Object, managers ...string) (Change, error) {
	change := Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Unchanged}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(managers...), e.fieldManager)
	if err != nil {
		return change, fmt.Errorf("moving fields of %s into the apply entry of %s: %w", kind, e.fieldManager, err)
	}
	if patch == nil {
		return change, nil
	}
	return e.Patch(ctx, kind, obj, client.RawPatch(types.JSONPatchType, patch), e.fieldManager)
}
