package ssa

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/api/convert"
)

// CreateOnlyVersion is the resourceVersion a create by apply carries: the
// largest one the API server parses (a uint64), above any revision etcd can
// give (an int64), so no stored object has it. The API server compares an
// apply's resourceVersion with the object's only when the object exists,
// and then fails the apply with a Conflict before writing anything; when
// none exists it creates the object, dropping the version as a create does.
const CreateOnlyVersion = "18446744073709551615"

// createByApply creates desired with a server-side apply of our field
// manager that only a missing object lets through (CreateOnlyVersion). It
// reports exists when an object of that name is there already (the
// Conflict), and fills obj from the response when it created one. desired
// is not changed.
func (e *Engine) createByApply(ctx context.Context, kind string, desired ApplyConfiguration, obj client.Object) (exists bool, err error) {
	u, err := convert.Unstructured(desired)
	if err != nil {
		return false, err
	}
	if u.GetResourceVersion() != "" || u.GetUID() != "" {
		return false, fmt.Errorf("%s %s to create carries a resourceVersion or a UID", kind, u.GetName())
	}
	u.SetResourceVersion(CreateOnlyVersion)
	e.applies.Add(1)
	if err := e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(e.fieldManager)); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return false, fmt.Errorf("reading the created %s %s: %w", kind, u.GetName(), err)
	}
	return false, nil
}

// applyCreating sends desired, the apply of an object the caller sees none
// of, so that it only creates it (CreateOnlyVersion, as createByApply):
// exists reports a namesake, left as it was. On an API server that refuses
// that (as Create learns it), a plain apply, from then on. desired holds
// the server's answer once written, and is as it was otherwise.
func (e *Engine) applyCreating(ctx context.Context, kind string, desired ApplyConfiguration, opts ...client.ApplyOption) (exists bool, err error) {
	e.applies.Add(1)
	meta := objectMetaOf(desired)
	if e.postCreates.Load() || meta == nil || meta.ResourceVersion != nil || meta.UID != nil {
		return false, e.client.Apply(ctx, desired, opts...)
	}
	meta.ResourceVersion = ptr.To(CreateOnlyVersion)
	err = e.client.Apply(ctx, desired, opts...)
	if err == nil {
		return false, nil
	}
	meta.ResourceVersion = nil
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case e.refusedCreateOnly(ctx, kind, err):
		e.applies.Add(1)
		return false, e.client.Apply(ctx, desired, opts...)
	}
	return false, err
}

// refusedCreateOnly reports an API server refusing a create by apply
// (refusesCreateOnly), and remembers it: creates go without one from then
// on.
func (e *Engine) refusedCreateOnly(ctx context.Context, kind string, err error) bool {
	if !refusesCreateOnly(err) {
		return false
	}
	if !e.postCreates.Swap(true) {
		log.FromContext(ctx).Info("the API server refuses a create by apply; creating with a create and an ownership upgrade from now on", "kind", kind, "error", err)
	}
	return true
}

// refusesCreateOnly reports whether err is an API server refusing the
// create by apply itself rather than the object: no apply patches (415),
// or a resourceVersion it will not take on a create (as its create handler
// says of a create carrying one).
func refusesCreateOnly(err error) bool {
	if apierrors.IsUnsupportedMediaType(err) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusInternalServerError:
		return strings.Contains(err.Error(), "resourceVersion")
	}
	return false
}
