package controllers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// waitingClaimPriority is the work queue priority of a claim that waits for
// a Sandbox (waitsForMember): ahead of the reconciles its own writes and
// its Sandbox's events cause for the claims served already, so that in a
// burst each claim's first pass does not queue behind them.
const waitingClaimPriority = 10

// claimEvents enqueues a claim on its own events, a claim that waits for a
// Sandbox first; like controller-runtime's own handler, it puts the
// initial list and resyncs (the resourceVersion unchanged) of the others
// last.
func claimEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			enqueueClaim(q, e.Object, e.IsInInitialList)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			enqueueClaim(q, e.ObjectNew, e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion())
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
	}
}

func enqueueClaim(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, unchanged bool) {
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		q.Add(req)
		return
	}
	var priority *int
	if c, ok := obj.(*extv1beta1.SandboxClaim); ok && waitsForMember(c) {
		priority = new(waitingClaimPriority)
	} else if unchanged {
		priority = new(handler.LowPriority)
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: priority}, req)
}
