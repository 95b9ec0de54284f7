package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// waitForClaim watches the claim until status.sandbox.name is set.
func (c *Client) waitForClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) (*extv1beta1.SandboxClaim, error) {
	last := claim
	obj, err := waitFor(ctx, c.extensions, "sandboxclaims", claim, nil, func(o runtime.Object) bool {
		cl, ok := o.(*extv1beta1.SandboxClaim)
		if ok {
			last = cl
		}
		return ok && claimBound(cl)
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: no sandbox bound (%s): %w", claim.Namespace, claim.Name,
			readyCondition(last.Status.Conditions), err)
	}
	return obj.(*extv1beta1.SandboxClaim), nil
}

// claimBound says a claim names its Sandbox.
func claimBound(c *extv1beta1.SandboxClaim) bool { return c.Status.Sandbox.Name != "" }

// waitForSandbox watches the Sandbox until it is Ready for its current
// spec (readyNow).
func (c *Client) waitForSandbox(ctx context.Context, sb *sandboxv1beta1.Sandbox) (*sandboxv1beta1.Sandbox, error) {
	last := sb
	obj, err := waitFor(ctx, c.sandboxes, "sandboxes", sb, nil, func(o runtime.Object) bool {
		s, ok := o.(*sandboxv1beta1.Sandbox)
		if ok {
			last = s
		}
		return ok && readyNow(s)
	})
	if err != nil {
		state := readyCondition(last.Status.Conditions)
		if c := meta.FindStatusCondition(last.Status.Conditions, sandboxv1beta1.ConditionReady); c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration < last.Generation {
			state += fmt.Sprintf(", observed at generation %d, the spec is at %d", c.ObservedGeneration, last.Generation)
		}
		return nil, fmt.Errorf("sandbox %s/%s: not ready (%s): %w", sb.Namespace, sb.Name, state, err)
	}
	return obj.(*sandboxv1beta1.Sandbox), nil
}

// readyNow says whether a Sandbox's Ready condition is True and was
// observed at its current generation: a Ready written before its spec last
// changed (a suspend the controller has not reported yet, then the SDK's
// own resume) says nothing about the Pod the spec asks for now. A Ready
// without an observedGeneration (a controller that does not set it) is
// taken as it is.
func readyNow(sb *sandboxv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && (c.ObservedGeneration == 0 || c.ObservedGeneration >= sb.Generation)
}

func readyCondition(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, "Ready")
	if c == nil {
		return "no Ready condition yet"
	}
	s := "Ready=" + string(c.Status)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

type object interface {
	runtime.Object
	metav1.Object
}

// waitFor returns obj once done says so, else watches it (one watch, from
// obj's resourceVersion, by a metadata.name field selector; first instead
// when not nil) until done or ctx ends. Only obj itself counts: another
// object of its name (another UID) is not it, and obj's deletion ends the
// wait. A watch the server closes is opened again from the last version
// seen; a version too old for the server (410) starts over from a fresh
// read.
func waitFor(ctx context.Context, rc *rest.RESTClient, resource string, obj object, first watch.Interface, done func(runtime.Object) bool) (runtime.Object, error) {
	if done(obj) {
		if first != nil {
			first.Stop()
		}
		return obj, nil
	}
	ns, name, rv, uid := obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), obj.GetUID()
	backoff := 100 * time.Millisecond
	for {
		w, err := first, error(nil)
		if w == nil {
			w, err = watchByName(ctx, rc, resource, ns, name, rv)
		}
		first = nil
		if err == nil {
			var cur runtime.Object
			cur, rv, err = drain(ctx, w, uid, rv, done)
			w.Stop()
			if cur != nil || err != nil {
				return cur, err
			}
		}
		if ctx.Err() != nil {
			return nil, waitError(ctx, ctx.Err())
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) {
			return nil, err
		}
		if rv == "" || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			// Start over from the object as it is now.
			fresh := obj.DeepCopyObject().(object)
			if err := rc.Get().Namespace(ns).Resource(resource).Name(name).Do(ctx).Into(fresh); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, ErrDeleted
				}
				return nil, waitError(ctx, err)
			}
			if uid != "" && fresh.GetUID() != uid {
				return nil, ErrDeleted // another object of the name now
			}
			if done(fresh) {
				return fresh, nil
			}
			rv = fresh.GetResourceVersion()
		}
		select {
		case <-ctx.Done():
			return nil, waitError(ctx, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// drain reads events until done (the object of uid, any object when uid
// is empty), the object is deleted (ErrDeleted), ctx ends, or the watch
// closes (nil, nil: watch again from the returned version; "" to read the
// object afresh). Events of other objects of the name only move the
// version on.
func drain(ctx context.Context, w watch.Interface, uid types.UID, rv string, done func(runtime.Object) bool) (runtime.Object, string, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, rv, waitError(ctx, ctx.Err())
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok:
				return nil, rv, nil
			case ev.Type == watch.Error:
				err := apierrors.FromObject(ev.Object)
				var st apierrors.APIStatus
				if errors.As(err, &st) && st.Status().Code == http.StatusGone {
					return nil, "", nil
				}
				return nil, rv, nil
			}
			o, ok := ev.Object.(object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			switch {
			case uid != "" && o.GetUID() != uid:
			case ev.Type == watch.Deleted:
				return nil, rv, ErrDeleted
			case done(o):
				return o, rv, nil
			}
		}
	}
}

// waitError turns a context's end into ErrTimeout (keeping the cause).
func waitError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// watchByName watches the object name in namespace from resourceVersion
// rv, by a metadata.name field selector (what RBAC lets a caller with
// watch on that one name do).
func watchByName(ctx context.Context, rc *rest.RESTClient, resource, namespace, name, rv string) (watch.Interface, error) {
	return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: rv,
		Watch:           true,
	}, metav1.ParameterCodec).Watch(ctx)
}
