package ssa

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upgradeAttempts bounds the fresh reads after a create whose ownership
// upgrade lost a race with another write (the object's first status).
const upgradeAttempts = 4

// NeedsUpgrade reports whether our field manager owns fields of obj through
// an Update entry (a create, or a patch of an older controller): fields an
// apply of ours cannot remove until UpgradeOwnership moved them into our
// Apply entry.
func (e *Engine) NeedsUpgrade(obj client.Object) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager == e.fieldManager && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" {
			return true
		}
	}
	return false
}

// UpgradeOwnership moves the fields the Update entries of managers from
// (our field manager when none is given) hold on obj into our field
// manager's Apply entry (client-go's csaupgrade): what a Create of ours
// recorded (a create, which must fail when the object exists, cannot be an
// apply), or what earlier writers of an object that is ours alone set (an
// older controller's patches). A later apply of ours then removes a field
// it no longer sets, as it would had it applied the field. Nothing but
// managedFields changes. The request carries obj's resourceVersion: an
// object changed since obj was read fails with a Conflict
// (apierrors.IsConflict) and nothing is written. obj is updated from the
// response; it reports whether a request was sent. The patch replaces the
// whole managedFields list, so obj must be as the API server returned it
// (a create's response, a read past the cache), never a cached object the
// cache trimmed to our managers' entries (controllers.CacheOptions).
func (e *Engine) UpgradeOwnership(ctx context.Context, kind string, obj client.Object, from ...string) (bool, error) {
	if len(from) == 0 {
		from = []string{e.fieldManager}
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(from...), e.fieldManager)
	if err != nil {
		return false, fmt.Errorf("upgrading ownership of %s %s: %w", kind, obj.GetName(), err)
	}
	if patch == nil {
		return false, nil
	}
	e.applies.Add(1)
	done := e.sending(objectKey(kind, e.fieldManager, obj.GetNamespace(), obj.GetName()))
	if err := e.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(e.fieldManager)); err != nil {
		done("", "", err)
		return true, fmt.Errorf("upgrading ownership of %s %s: %w", kind, obj.GetName(), err)
	}
	done(obj.GetResourceVersion(), "", nil)
	return true, nil
}

// upgradeAfterCreate upgrades the ownership of an object just created,
// reading it again, past the cache, when another write came first.
func (e *Engine) upgradeAfterCreate(ctx context.Context, kind string, obj client.Object) error {
	uid := obj.GetUID()
	var err error
	for range upgradeAttempts {
		if _, err = e.UpgradeOwnership(ctx, kind, obj); !apierrors.IsConflict(err) {
			return err
		}
		if gerr := e.reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
			return client.IgnoreNotFound(gerr)
		}
		if obj.GetUID() != uid || obj.GetDeletionTimestamp() != nil {
			return nil // not the object created, or going: nothing to upgrade
		}
	}
	return err
}

// Reader reads objects past the cache when set (ReadWith), else through the
// engine's client.
func (e *Engine) Reader() client.Reader { return e.reader }
