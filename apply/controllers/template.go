package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// TemplateReconciler keeps each SandboxTemplate's shared NetworkPolicy in
// line with it and labels the template with its ref hash. It changes
// nothing else of the template.
type TemplateReconciler struct {
	Client client.Client
	Engine *ssa.Engine
	// ControllerNamespace is where the sandbox router runs (the secure
	// default admits ingress only from there).
	ControllerNamespace string
	// Policy holds the policies the NetworkPolicy, and the Sandbox the
	// template makes, are checked against.
	Policy   *policy.Holder
	Recorder events.EventRecorder
	// Defaults are what the Pods of Sandboxes made from a template get
	// where it leaves a field unset (as the Sandbox reconciler renders them).
	Defaults render.DefaultsSource

	// denied holds, per template, the denial last reported in an event,
	// so that a template is reported once per reason, not per reconcile.
	denied sync.Map // types.NamespacedName -> string

	// retries backs off expected, passing failures without logging them.
	retries retries
}

// SetupWithManager registers the reconciler and its watches.
func (r *TemplateReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandboxtemplate").
		For(&extv1beta1.SandboxTemplate{}).
		Owns(&networkingv1.NetworkPolicy{})
	// A template denied for want of a runtime class is judged again when
	// the default one changes.
	return watchRuntimeClasses(b, r.Defaults, r.allTemplates).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// Reconcile renders one template and applies the difference.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := r.reconcile(ctx, req)
	return r.retries.quiet(ctx, "sandboxtemplate", req, result, err)
}

func (r *TemplateReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	t := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			r.denied.Delete(req.NamespacedName)
			r.Engine.Forget("SandboxTemplate", req.Namespace, req.Name)
			r.Engine.Forget("NetworkPolicy", req.Namespace, render.NetworkPolicyName(req.Name))
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil || namespaceDeleting(ctx, r.Client, t.Namespace) {
		return reconcile.Result{}, nil
	}
	if err := r.checkMembers(ctx, t); err != nil {
		return reconcile.Result{}, err
	}
	desired, err := render.Template(render.TemplateInputs{Template: t, ControllerNamespace: r.ControllerNamespace})
	if err != nil {
		log.FromContext(ctx).Info("template cannot be rendered", "error", err.Error())
		return reconcile.Result{}, nil
	}
	var changes ssa.ChangeSet
	c, err := ssa.Apply(ctx, r.Engine, "SandboxTemplate", desired.Labels, t, extac.ExtractSandboxTemplate, ssa.Options{})
	changes = append(changes, c)
	if err != nil {
		return reconcile.Result{}, err
	}

	np := &networkingv1.NetworkPolicy{}
	key := types.NamespacedName{Namespace: t.Namespace, Name: render.NetworkPolicyName(t.Name)}
	switch err := r.Client.Get(ctx, key, np); {
	case apierrors.IsNotFound(err):
		np = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading network policy: %w", err)
	}
	switch {
	case desired.NetworkPolicy != nil:
		if np != nil && !controlledBy(np, t.UID) {
			// Someone else's policy has the name: leave it alone, and say so.
			log.FromContext(ctx).Info("a NetworkPolicy with the template's policy name exists that the template does not own; leaving it", "networkPolicy", key.Name)
			break
		}
		if np == nil {
			inNS, _ := r.Policy.In(ctx, t.Namespace)
			ds, err := r.Policy.Get().CheckAs(inNS, gvkNetworkPolicy, desired.NetworkPolicy)
			if err != nil {
				return reconcile.Result{}, err
			}
			if denied := policy.Denied(ds); len(denied) > 0 {
				if r.Recorder != nil {
					r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, EventPolicyDenied, "Check", "NetworkPolicy not created: %s", policy.Summary(denied))
				}
				break
			}
		}
		c, err := ssa.Apply(ctx, r.Engine, "NetworkPolicy", desired.NetworkPolicy, np, networkingv1ac.ExtractNetworkPolicy, ssa.Options{})
		changes = append(changes, c)
		if err != nil {
			return reconcile.Result{}, err
		}
	case desired.DeleteNetworkPolicy && np != nil && controlledBy(np, t.UID):
		c, err := r.Engine.Delete(ctx, "NetworkPolicy", np)
		changes = append(changes, c)
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	if changes.Changed() {
		log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
	}
	return reconcile.Result{}, nil
}

// checkMembers checks the Sandbox the template makes (what a pool member or
// a cold claim would be) and reports a denial on the template with one
// Warning event: templates have no status, and the pools and claims that
// use it say so in theirs (they create nothing from it).
func (r *TemplateReconciler) checkMembers(ctx context.Context, t *extv1beta1.SandboxTemplate) error {
	key := client.ObjectKeyFromObject(t)
	var denied *policyError
	var terminal *terminalError
	err := checkNewSandbox(ctx, r.Policy, render.TemplateProbe(t), render.CurrentDefaults(r.Defaults))
	switch {
	case errors.As(err, &denied), errors.As(err, &terminal):
		msg := "Sandboxes made from this template are refused; no pool member or claim Sandbox is created from it: " + err.Error()
		reason := EventPolicyDenied
		if denied == nil {
			reason = extv1beta1.ReasonReconcilerError
		}
		if last, ok := r.denied.Load(key); (!ok || last != msg) && r.Recorder != nil {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, reason, "Check", "%s", msg)
		}
		r.denied.Store(key, msg)
	case err != nil:
		// The pools and claims that use the template fail closed on
		// their own; this is retried.
		return fmt.Errorf("checking the template's Sandbox: %w", err)
	default:
		r.denied.Delete(key)
	}
	return nil
}

func controlledBy(o client.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == uid
}
