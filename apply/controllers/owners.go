package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// enqueueController maps an object to the one its controller reference names,
// when that is of kind gk (API group and kind): the owner's reconciler
// looks again when what it controls changes. It stands in for
// controller-runtime's Owns, which looks up a REST mapping for every
// matching reference of every event to learn whether the owner is
// namespaced (about 200 MB, 5 %, of what the controller allocated while
// 5,000 Sandboxes were suspended). Every owner kind here is namespaced,
// and owner references never cross namespaces.
func enqueueController(gk schema.GroupKind) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ref := sandboxv1beta1.ControllerOf(o, gk)
		if ref == nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
	})
}

// sandboxOfChild maps a Pod or Service to the Sandbox that controls it, or,
// when nothing controls it, to the Sandbox of its name: an unowned one may
// become adoptable, or go away and free the name.
func sandboxOfChild(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetName()
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		if !sandboxv1beta1.RefersTo(*ref, sandboxv1beta1.SandboxKind) {
			return nil
		}
		name = ref.Name
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
