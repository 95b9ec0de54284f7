package controllers

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentsandbox/reconciler/apply/metrics"
)

// retries backs off reconciles that failed for an expected, passing reason
// (an optimistic-lock conflict, a cache that was behind, an API server
// that is restarting) without logging them as errors: they are counted in
// agent_sandbox_reconcile_retries_total and logged at V(1). Anything else
// is returned to controller-runtime, which logs it and backs off.
type retries struct {
	once    sync.Once
	limiter workqueue.TypedRateLimiter[reconcile.Request]
}

// Same shape as controller-runtime's default per-item backoff.
const (
	retryBase = 50 * time.Millisecond
	retryMax  = 30 * time.Second
)

// quiet turns the outcome of a reconcile into what controller-runtime
// should see: the error, or a silent backed-off retry, or nothing at all
// when the request was cut short by shutdown or lost leadership (the next
// leader reconciles everything when it starts) or the namespace is being
// deleted. A terminal error (reconcile.TerminalError) was reported where
// the user looks (status, an event) and waits for a change to the object
// or its inputs, which is watched: it is neither retried nor logged as an
// error (controller-runtime would log it as one each time), only at V(1),
// and the result (a recheck the plan asked for) stands.
func (r *retries) quiet(ctx context.Context, controller string, req reconcile.Request, result reconcile.Result, err error) (reconcile.Result, error) {
	r.once.Do(func() {
		r.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryMax)
	})
	if err == nil {
		r.limiter.Forget(req)
		return result, nil
	}
	if ctx.Err() != nil || namespaceTerminating(err) {
		r.limiter.Forget(req)
		return reconcile.Result{}, nil
	}
	if errors.Is(err, reconcile.TerminalError(nil)) {
		r.limiter.Forget(req)
		log.FromContext(ctx).V(1).Info("not retried until the object or its inputs change", "error", err.Error())
		return result, nil
	}
	reason := expectedReason(err)
	if reason == "" {
		return result, err
	}
	metrics.ReconcileRetries.WithLabelValues(controller, reason).Inc()
	wait := r.limiter.When(req)
	log.FromContext(ctx).V(1).Info("retrying", "reason", reason, "after", wait, "error", err.Error())
	return reconcile.Result{RequeueAfter: wait}, nil
}

// expectedReason names an error that is part of normal operation among
// several writers and a restarting control plane, or returns "".
func expectedReason(err error) string {
	switch {
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsAlreadyExists(err):
		return "already_exists"
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err):
		return "unavailable"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), isNetTimeout(err):
		return "unavailable"
	case serviceAccountMissing(err):
		return "service_account"
	}
	return ""
}

// serviceAccountMissing reports the ServiceAccount admission plugin's
// refusal of a Pod whose ServiceAccount does not exist (yet): a namespace
// just made, whose "default" the controller manager has not created, or a
// Sandbox applied before its ServiceAccount (GitOps tools apply in any
// order). Nothing here watches ServiceAccounts, so this is retried with
// the bounded backoff (at most retryMax apart) rather than
// controller-runtime's, which grows to minutes. The refusal has no cause
// of its own; its message is the plugin's ("error looking up service
// account ns/name: ...").
func serviceAccountMissing(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "error looking up service account")
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// namespaceDeleting reports whether ns is being deleted: everything in it
// goes with it, and the API server refuses to create anything there, so
// there is nothing to reconcile (a reconcile would only spend a refused
// create and a pointless status write per event). Namespaces are read
// from the cache (metadata only). A namespace the cache does not know is
// not "deleting": it may be new.
func namespaceDeleting(ctx context.Context, c client.Reader, ns string) bool {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, m); err != nil {
		return false
	}
	return m.DeletionTimestamp != nil
}

// namespaceTerminating reports an error that only says the namespace is
// being deleted: everything in it goes away with it, so there is nothing to
// retry and nothing to log.
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
