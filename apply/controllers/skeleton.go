package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// skeleton is what every reconciler does around its own work: read the
// object from the cache (and tell the engine what it shows: ssa.Seen);
// forget what it remembers of one that is gone; leave alone one being
// deleted, or in a namespace being deleted (garbage collection, or the
// namespace's deletion, removes what it owns, and the API server refuses
// creates there); run its body; and turn the outcome into what
// controller-runtime should see (retries.quiet): expected, passing
// failures retried quietly with backoff, a terminal error
// (reconcile.TerminalError: reported already, in status or an event, and
// only a change to the object or its inputs can fix it) not retried and
// not logged as an error. Its zero value is ready to use.
type skeleton[T client.Object] struct {
	retries retries
}

// onDeletion is what the skeleton does with an object being deleted, or in
// a namespace being deleted.
type onDeletion int

const (
	// forgetDeleting: its body does not run, and what the reconciler
	// remembers of it is forgotten.
	forgetDeleting onDeletion = iota
	// skipDeleting: its body does not run; what the reconciler remembers
	// of it goes when it is gone.
	skipDeleting
	// runDeleting: its body runs all the same (and looks at the namespace
	// itself before it writes).
	runDeleting
)

// objectKind is what one reconciler tells its skeleton about its kind.
type objectKind[T client.Object] struct {
	// controller names the reconciler in metrics.
	controller string
	// reader reads the object, from the manager's cache.
	reader client.Reader
	// object returns an empty object to read into.
	object func() T
	// deletion is what an object being deleted gets.
	deletion onDeletion
	// forget drops what the reconciler remembers of an object: gone (obj
	// is then nil) or, with forgetDeleting, being deleted.
	forget func(key types.NamespacedName, obj T)
	// body is the reconciler's own work on the object.
	body func(ctx context.Context, obj T) (reconcile.Result, error)
	// engine, when set, is told the cache shows the object (ssa.Seen),
	// as kind: what it remembers of our writes of it that the object
	// shows goes.
	engine *ssa.Engine
	kind   string
}

// run reconciles the object req names.
func (s *skeleton[T]) run(ctx context.Context, req reconcile.Request, k objectKind[T]) (reconcile.Result, error) {
	result, err := s.load(ctx, req, k)
	return s.retries.quiet(ctx, k.controller, req, result, err)
}

func (s *skeleton[T]) load(ctx context.Context, req reconcile.Request, k objectKind[T]) (reconcile.Result, error) {
	obj := k.object()
	if err := k.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			var gone T
			k.forget(req.NamespacedName, gone)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if k.engine != nil {
		k.engine.Seen(k.kind, obj)
	}
	if k.deletion != runDeleting && (obj.GetDeletionTimestamp() != nil || namespaceDeleting(ctx, k.reader, obj.GetNamespace())) {
		if k.deletion == forgetDeleting {
			k.forget(req.NamespacedName, obj)
		}
		return reconcile.Result{}, nil
	}
	return k.body(ctx, obj)
}

// terminal is the outcome of a failure only a change to the object or its
// inputs can fix, once reported (report is the error of reporting it, in
// status): a terminal error, or the reporting's own error, to be retried.
func terminal(cause, report error) error {
	if report != nil {
		return report
	}
	return reconcile.TerminalError(cause)
}
