package ssa

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/api/convert"
)

// Delete deletes obj, guarded by its UID so that a newer object of the same
// name is never deleted by mistake. An object that is already gone or being
// deleted is unchanged. So is one this engine deleted moments ago (within
// CreateExpectation) that obj shows as it was before: the cache has not
// caught up; nothing is sent, and the change is Pending (look again
// shortly).
func (e *Engine) Delete(ctx context.Context, kind string, obj client.Object, opts ...client.DeleteOption) (change Change, err error) {
	change = Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Deleted}
	defer func() { e.observeOK(change, err) }()
	if obj.GetDeletionTimestamp() != nil {
		change.Action = Unchanged
		return change, nil
	}
	uid := obj.GetUID()
	key := writeKey{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if at, ok := e.deleted.Recall(key, uid); ok && uid != "" && time.Since(at) < CreateExpectation {
		change.Action, change.Pending = Unchanged, true
		return change, nil
	}
	pre := client.Preconditions{UID: &uid}
	for _, o := range opts {
		if p, ok := o.(client.Preconditions); ok && p.ResourceVersion != nil {
			pre.ResourceVersion = p.ResourceVersion
		}
	}
	opts = append(opts, pre)
	n := e.deletes.Add(1)
	e.Forget(kind, obj.GetNamespace(), obj.GetName())
	err = e.client.Delete(ctx, obj, opts...)
	if err != nil && !apierrors.IsNotFound(err) {
		return change, fmt.Errorf("deleting %s: %w", kind, err)
	}
	now := time.Now()
	if uid != "" {
		e.deleted.Remember(key, uid, now)
	}
	if n%256 == 0 {
		before := now.Add(-time.Minute)
		e.deleted.Sweep(func(at time.Time) bool { return at.Before(before) })
	}
	if err != nil {
		change.Action, err = Unchanged, nil
	}
	return change, err
}

// DeleteIfUnchanged deletes obj only if it is still exactly the object the
// caller decided on: guarded by its UID and its resourceVersion. Any change
// since (another controller adopted it, a claim took it, its status moved
// on) fails the delete with a Conflict, and the caller decides again from a
// fresh view. Deletes of objects that hold or guard user data go this way.
func (e *Engine) DeleteIfUnchanged(ctx context.Context, kind string, obj client.Object, opts ...client.DeleteOption) (Change, error) {
	if obj.GetResourceVersion() == "" {
		return Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()},
			fmt.Errorf("deleting %s %s: no resourceVersion to guard the delete with", kind, obj.GetName())
	}
	rv := obj.GetResourceVersion()
	return e.Delete(ctx, kind, obj, append(opts, client.Preconditions{ResourceVersion: &rv})...)
}

// ConflictError reports fields that another field manager owns and that we
// would change. The controller does not fight over them: it reports the
// conflict and waits for a change to the object or its inputs.
type ConflictError struct {
	Change Change
	// Fields are the API server's descriptions of the conflicting fields.
	Fields []string
	Err    error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s: fields owned by another field manager conflict with ours: %s",
		e.Change.Kind, e.Change.Namespace, e.Change.Name, strings.Join(e.Fields, "; "))
}

func (e *ConflictError) Unwrap() error { return e.Err }

// IsConflict reports whether err is (or wraps) a ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}

func wrapConflict(kind string, change Change, err error) error {
	if !apierrors.IsConflict(err) {
		return fmt.Errorf("applying %s: %w", kind, err)
	}
	var fields []string
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == metav1.CauseTypeFieldManagerConflict {
				fields = append(fields, c.Message)
			}
		}
	}
	if len(fields) == 0 {
		// A plain optimistic-concurrency conflict, not an ownership one.
		return fmt.Errorf("applying %s: %w", kind, err)
	}
	return &ConflictError{Change: change, Fields: fields, Err: err}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func isNil(o any) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Create creates desired, which must not exist yet: the way to make an
// object whose name is derived deterministically, so that a caller acting
// on a stale view can never end up with two. An object of its name that
// already exists is reported as Unchanged with exists set; nothing is
// written to it. The object is owned by the engine's field manager through
// an Apply entry, as if applied, so a later apply of ours can remove what it
// no longer sets. obj receives the object as the API server returned it.
//
// It is one request: a server-side apply guarded by CreateOnlyVersion, a
// resourceVersion no stored object has (see createByApply). An API server
// that refuses that (an older or another implementation) gets, from then
// on, a create followed by a second request that moves the create's Update
// entry into our Apply entry (UpgradeOwnership).
func (e *Engine) Create(ctx context.Context, kind string, desired ApplyConfiguration, obj client.Object) (change Change, exists bool, err error) {
	change = Change{Kind: kind, Namespace: deref(desired.GetNamespace()), Name: deref(desired.GetName()), Action: Created}
	done := e.sending(objectKey(kind, e.fieldManager, change.Namespace, change.Name))
	defer func() {
		if err != nil || exists {
			done("", "", err)
			return
		}
		done(obj.GetResourceVersion(), "", nil)
	}()
	if !e.postCreates.Load() {
		exists, err := e.createByApply(ctx, kind, desired, obj)
		switch {
		case err == nil && exists:
			// A request was spent, so this is not a saving: not observed.
			change.Action = Unchanged
			return change, true, nil
		case err == nil:
			e.observe(change)
			return change, false, nil
		case !e.refusedCreateOnly(ctx, kind, err):
			return change, false, fmt.Errorf("creating %s: %w", kind, err)
		}
	}
	return e.createAndUpgrade(ctx, change, desired, obj)
}

// createAndUpgrade creates desired with a create request, whose Update
// entry is then made an Apply entry (UpgradeOwnership); change is the
// create as Create reports it.
func (e *Engine) createAndUpgrade(ctx context.Context, change Change, desired ApplyConfiguration, obj client.Object) (Change, bool, error) {
	kind := change.Kind
	if err := convert.JSON(desired, obj); err != nil {
		return change, false, fmt.Errorf("creating %s: %w", kind, err)
	}
	e.applies.Add(1)
	if err := e.client.Create(ctx, obj, client.FieldOwner(e.fieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// A request was spent, so this is not a saving: not observed.
			change.Action = Unchanged
			return change, true, nil
		}
		return change, false, fmt.Errorf("creating %s: %w", kind, err)
	}
	e.observe(change)
	if err := e.upgradeAfterCreate(ctx, kind, obj); err != nil {
		// The object exists and is ours; only the form of our ownership
		// is not upgraded yet. An adoption upgrades it before it applies.
		log.FromContext(ctx).Info("ownership of a created object not moved to an apply entry yet", "kind", kind, "name", obj.GetName(), "error", err)
	}
	return change, false, nil
}
