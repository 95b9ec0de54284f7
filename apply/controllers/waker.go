package controllers

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// waker queues reconciles of a controller from outside its watches: the
// warm queue wakes what it parked (WarmQueue.SetWake). Its Source, watched
// by the controller, keeps the controller's queue once the controller
// runs; wakes before then are dropped (the controller's start reconciles
// everything anyway).
type waker struct {
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// Source is the source to watch.
func (w *waker) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.queue.Store(&q)
		return nil
	})
}

// Wake queues a reconcile of key.
func (w *waker) Wake(key types.NamespacedName) {
	if q := w.queue.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: key})
	}
}
