package controllers

import (
	"context"

	nodev1 "k8s.io/api/node/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/render"
)

// watchRuntimeClasses adds a RuntimeClass watch to a controller whose
// defaults follow the cluster's RuntimeClasses (--default-runtime-class=auto):
// a class installed or removed may change the default runtime class, and
// with it what a Pod not yet created gets and whether the policies allow
// it. The RuntimeClass is in the cache before the watch's handlers run, so
// the reconciles see the new default.
func watchRuntimeClasses(b *builder.Builder, d render.DefaultsSource, m handler.MapFunc) *builder.Builder {
	if !runtimeclass.FollowsCluster(d) {
		return b
	}
	return b.Watches(&nodev1.RuntimeClass{}, handler.EnqueueRequestsFromMapFunc(m))
}

// awaitingPod maps a RuntimeClass change to the Sandboxes a new default
// runtime class concerns: those whose template names no class and that are
// not Ready (a Ready one has its Pod, which keeps its class).
func (r *SandboxReconciler) awaitingPod(ctx context.Context, _ client.Object) []reconcile.Request {
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing Sandboxes after a RuntimeClass change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		sb := &list.Items[i]
		if sb.Spec.PodTemplate.Spec.RuntimeClassName != nil {
			continue
		}
		if c := apimeta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
	}
	return out
}

// allTemplates maps a RuntimeClass change to every template: each is
// judged again by the Sandbox it makes.
func (r *TemplateReconciler) allTemplates(ctx context.Context, _ client.Object) []reconcile.Request {
	var list extv1beta1.SandboxTemplateList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing SandboxTemplates after a RuntimeClass change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// allPools maps a RuntimeClass change to every pool: one that created
// nothing because its members were denied may create them now.
func (r *WarmPoolReconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var list extv1beta1.SandboxWarmPoolList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing SandboxWarmPools after a RuntimeClass change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// deniedClaims maps a RuntimeClass change to the claims refused by policy
// (a cold start denied for want of a runtime class may go ahead now).
func (r *ClaimReconciler) deniedClaims(ctx context.Context, _ client.Object) []reconcile.Request {
	var list extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing SandboxClaims after a RuntimeClass change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		c := &list.Items[i]
		if ready := apimeta.FindStatusCondition(c.Status.Conditions, extv1beta1.ConditionReady); ready != nil && ready.Reason == extv1beta1.ReasonPolicyDenied {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return out
}
