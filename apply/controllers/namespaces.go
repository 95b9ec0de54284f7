package controllers

import (
	"context"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// namespaceMeta is how namespaces are read: metadata only (labels), from
// the manager's cache.
func namespaceMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// NamespaceLabels returns a function reading a namespace's labels from r
// (the manager's cache), for policy.Holder.NamespaceLabels. A namespace it
// cannot read has no labels: the cluster's default modes apply.
func NamespaceLabels(r client.Reader) func(ctx context.Context, namespace string) map[string]string {
	return func(ctx context.Context, namespace string) map[string]string {
		ns := namespaceMeta()
		if err := r.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
			return nil
		}
		return ns.Labels
	}
}

// policyLabels are a namespace's policy mode labels.
func policyLabels(o client.Object) map[string]string {
	out := map[string]string{}
	for k, v := range o.GetLabels() {
		if strings.HasPrefix(k, policy.ModeLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// policyLabelsChanged passes namespace updates that change a mode label.
var policyLabelsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(policyLabels(e.ObjectOld), policyLabels(e.ObjectNew))
	},
}

// deniedIn enqueues, when a namespace's mode labels change, the objects of
// list's kind in it whose Ready condition says PolicyDenied: a mode turned
// to warn, audit or off lets them through without an edit of their own.
func deniedIn(r client.Reader, newList func() client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, ns client.Object) []reconcile.Request {
		list := newList()
		if err := r.List(ctx, list, client.InNamespace(ns.GetName())); err != nil {
			return nil
		}
		var out []reconcile.Request
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if ok && policyDenied(obj) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
			return nil
		})
		return out
	})
}

// policyDenied reports whether an object's Ready condition is False for
// PolicyDenied.
func policyDenied(o client.Object) bool {
	var conds []metav1.Condition
	switch t := o.(type) {
	case *sandboxv1beta1.Sandbox:
		conds = t.Status.Conditions
	case *extv1beta1.SandboxWarmPool:
		conds = t.Status.Conditions
	case *extv1beta1.SandboxClaim:
		conds = t.Status.Conditions
	}
	c := apimeta.FindStatusCondition(conds, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == sandboxv1beta1.ReasonPolicyDenied
}

// watchModeLabels adds, when the policies read namespace labels, a watch
// that re-checks the denied objects (of newList's kind) of a namespace
// whose mode labels change.
func watchModeLabels(b *builder.Builder, r client.Reader, h *policy.Holder, newList func() client.ObjectList) *builder.Builder {
	if h == nil || h.NamespaceLabels == nil {
		return b
	}
	return b.Watches(namespaceMeta(), deniedIn(r, newList), builder.WithPredicates(policyLabelsChanged))
}
