package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
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
	np := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: render.NetworkPolicyName(t.Name)}, np); {
	case apierrors.IsNotFound(err):
		np = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading network policy: %w", err)
	}
	plan, err := r.decide(ctx, t, np)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.run(ctx, t, plan)
}

// decide plans a template's reconcile, checks the plan against the
// policies and, on a denial, plans again knowing it. It remembers the
// refusal of the template's Sandboxes the plan reports.
func (r *TemplateReconciler) decide(ctx context.Context, t *extv1beta1.SandboxTemplate, np *networkingv1.NetworkPolicy) (render.Plan, error) {
	key := client.ObjectKeyFromObject(t)
	in := render.TemplatePlanInputs{
		TemplateInputs: render.TemplateInputs{Template: t, ControllerNamespace: r.ControllerNamespace},
		NetworkPolicy:  np, Policies: r.Policy.Get() != nil, Defaults: render.CurrentDefaults(r.Defaults),
	}
	if last, ok := r.denied.Load(key); ok {
		in.Reported = last.(string)
	}
	plan, _ := render.PlanTemplate(in)
	if len(plan.Checks) > 0 {
		var err error
		if in.MembersDenied, in.NetworkPolicyDenied, err = r.judge(ctx, t, plan.Checks); err != nil {
			return render.Plan{}, err
		}
	}
	plan, refused := render.PlanTemplate(in)
	if refused != "" {
		r.denied.Store(key, refused)
	} else {
		r.denied.Delete(key)
	}
	return plan, nil
}

// judge checks a template's plan: the Sandbox it makes, with what that
// makes, and the NetworkPolicy it is about to create, in the policy modes
// of its namespace. It returns the denial of each ("" when allowed).
func (r *TemplateReconciler) judge(ctx context.Context, t *extv1beta1.SandboxTemplate, checks []render.Check) (members, networkPolicy string, err error) {
	set := r.Policy.Get()
	if set == nil {
		return "", "", nil
	}
	inNS, _ := r.Policy.In(ctx, t.Namespace)
	var sandbox []render.Check
	for _, c := range checks {
		if c.Kind != "NetworkPolicy" {
			sandbox = append(sandbox, c)
			continue
		}
		ds, err := set.CheckAs(inNS, gvkNetworkPolicy, c.Object)
		if err != nil {
			return "", "", err
		}
		if denied := policy.Denied(ds); len(denied) > 0 {
			networkPolicy = policy.Summary(denied)
		}
	}
	var denied *policyError
	switch _, err := checkPlanned(inNS, set, sandbox); {
	case errors.As(err, &denied):
		members = denied.Error()
	case err != nil:
		// The pools and claims that use the template fail closed on
		// their own; this is retried.
		return "", "", fmt.Errorf("checking the template's Sandbox: %w", err)
	}
	return members, networkPolicy, nil
}

// run carries out a template's plan, step by step in order, stopping at
// the first that fails; a problem the plan met (the template cannot be
// rendered, another owner's NetworkPolicy holds the name) is logged.
func (r *TemplateReconciler) run(ctx context.Context, t *extv1beta1.SandboxTemplate, plan render.Plan) error {
	var changes ssa.ChangeSet
	for _, s := range plan.Steps {
		if s.Action == render.ActionEvent {
			if r.Recorder != nil {
				r.Recorder.Eventf(t, nil, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
			}
			continue
		}
		c, err := execute(ctx, r.Engine, s)
		changes = append(changes, c)
		if err != nil {
			return err
		}
	}
	if plan.Problem != "" {
		log.FromContext(ctx).Info(plan.Problem, "networkPolicy", render.NetworkPolicyName(t.Name))
	}
	if changes.Changed() {
		log.FromContext(ctx).V(1).Info("applied", "changes", changes.String())
	}
	return nil
}
