package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// TemplateReconciler keeps each SandboxTemplate's shared NetworkPolicy in
// line with it and labels the template with its ref hash. The policy
// selects on the collision-free sandbox-template-ref-sha256 label once
// no Pod of the template lacks it (see legacyPods). It changes
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

	// denied holds, per template (by UID), the denial last reported in an
	// event (its message), so that a template is reported once per reason,
	// not per reconcile.
	denied objectMemo[string]

	// skeleton loads, skips, forgets and retries around reconcile.
	skeleton skeleton[*extv1beta1.SandboxTemplate]
}

// SetupWithManager registers the reconciler and its watches.
func (r *TemplateReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sandboxtemplate").
		For(&extv1beta1.SandboxTemplate{}).
		Watches(&networkingv1.NetworkPolicy{}, enqueueController(extv1beta1.TemplateKind)).
		// A NetworkPolicy of a template's policy name that the template
		// does not own (left in place) going away frees the name: the
		// template makes its own.
		Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(unownedPolicyToTemplate)).
		// Update events map both the old and the new Pod: one relabelled
		// (or deleted) was a legacy Pod.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.legacyPodToTemplates))
	// A template denied for want of a runtime class is judged again when
	// the default one changes.
	return watchRuntimeClasses(b, r.Defaults, r.allTemplates).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// unownedPolicyToTemplate maps a NetworkPolicy without a controller whose
// name is a template's policy name (NetworkPolicyName) to that template.
func unownedPolicyToTemplate(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := strings.CutSuffix(o.GetName(), render.NetworkPolicyName(""))
	if !ok || name == "" || metav1.GetControllerOfNoCopy(o) != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// Reconcile renders one template and applies the difference. A template
// being deleted is left alone: garbage collection removes its
// NetworkPolicy.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.skeleton.run(ctx, req, objectKind[*extv1beta1.SandboxTemplate]{
		controller: "sandboxtemplate", reader: r.Client, deletion: skipDeleting,
		object: func() *extv1beta1.SandboxTemplate { return &extv1beta1.SandboxTemplate{} },
		forget: r.forget, body: r.reconcile, engine: r.Engine, kind: "SandboxTemplate",
	})
}

// forget drops what this process remembers of a template that is gone.
func (r *TemplateReconciler) forget(key types.NamespacedName, _ *extv1beta1.SandboxTemplate) {
	r.denied.Forget(key)
	r.Engine.Forget("SandboxTemplate", key.Namespace, key.Name)
	r.Engine.Forget("NetworkPolicy", key.Namespace, render.NetworkPolicyName(key.Name))
}

func (r *TemplateReconciler) reconcile(ctx context.Context, t *extv1beta1.SandboxTemplate) (reconcile.Result, error) {
	np := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: render.NetworkPolicyName(t.Name)}, np); {
	case apierrors.IsNotFound(err):
		np = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading network policy: %w", err)
	}
	legacy, err := r.legacyPods(ctx, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	plan, err := r.decide(ctx, t, np, legacy)
	if err != nil {
		return reconcile.Result{}, err
	}
	var result reconcile.Result
	if legacy {
		// Level-triggered as well: the policy narrows once the last
		// legacy Pod is relabelled or gone, whichever event brings it.
		result.RequeueAfter = legacyRecheck
	}
	return result, r.run(ctx, t, plan)
}

// legacyRecheck is how often a template whose policy still selects on the
// ref hash alone (legacyPods) is looked at again.
const legacyRecheck = 5 * time.Second

// legacyPods reports Pods in the template's namespace with its ref hash
// but without the sandbox-template-ref-sha256 label: made before the label
// existed and not relabelled by the Sandbox reconciler yet. While there
// are, the template's NetworkPolicy keeps selecting by ref hash alone.
// Only Pods controlled by a Sandbox made from this template count.
func (r *TemplateReconciler) legacyPods(ctx context.Context, t *extv1beta1.SandboxTemplate) (bool, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(t.Namespace),
		client.MatchingLabels{sandboxv1beta1.LabelSandboxTemplateRefHash: render.NameHash(t.Name)}); err != nil {
		return false, fmt.Errorf("listing the template's pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !isLegacyTemplatePod(p) {
			continue
		}
		// Only the Pod of a Sandbox made from this template holds the
		// selector back: anyone who may create Pods could label one with
		// the ref hash and keep the policy on the colliding hash forever.
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "Sandbox" || ref.APIVersion != sandboxv1beta1.GroupVersion.String() {
			continue
		}
		sb := &sandboxv1beta1.Sandbox{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, sb); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, fmt.Errorf("reading the sandbox of a pod: %w", err)
		}
		if sb.UID == ref.UID && render.MadeFromTemplate(sb) && sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef] == t.Name {
			return true, nil
		}
	}
	return false, nil
}

// isLegacyTemplatePod reports a Pod with a template ref hash but without
// the template's collision-free key.
func isLegacyTemplatePod(o client.Object) bool {
	l := o.GetLabels()
	return l[sandboxv1beta1.LabelSandboxTemplateRefHash] != "" && l[sandboxv1beta1.LabelSandboxTemplateRefSHA256] == ""
}

// legacyPodToTemplates maps a Pod that is, or was (an update's old
// object), a legacy template Pod to the templates of its namespace whose
// ref hash it carries: relabelled or gone, it may let their
// NetworkPolicies select on the collision-free key.
func (r *TemplateReconciler) legacyPodToTemplates(ctx context.Context, o client.Object) []reconcile.Request {
	if !isLegacyTemplatePod(o) {
		return nil
	}
	var templates extv1beta1.SandboxTemplateList
	if err := r.Client.List(ctx, &templates, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing templates for a pod", "pod", o.GetName())
		return nil
	}
	hash := o.GetLabels()[sandboxv1beta1.LabelSandboxTemplateRefHash]
	var out []reconcile.Request
	for _, t := range templates.Items {
		if render.NameHash(t.Name) == hash {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}})
		}
	}
	return out
}

// decide plans a template's reconcile, checks the plan against the
// policies and, on a denial, plans again knowing it. It remembers the
// refusal of the template's Sandboxes the plan reports.
func (r *TemplateReconciler) decide(ctx context.Context, t *extv1beta1.SandboxTemplate, np *networkingv1.NetworkPolicy, legacy bool) (render.Plan, error) {
	key := client.ObjectKeyFromObject(t)
	in := render.TemplatePlanInputs{
		TemplateInputs: render.TemplateInputs{Template: t, ControllerNamespace: r.ControllerNamespace, LegacyPods: legacy},
		NetworkPolicy:  np, Policies: r.Policy.Get() != nil, Defaults: render.CurrentDefaults(r.Defaults),
	}
	if last, ok := r.denied.Recall(key, t.UID); ok {
		in.Reported = last
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
		r.denied.Remember(key, t.UID, refused)
	} else {
		r.denied.Forget(key)
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
		gvk, _ := c.GVK()
		ds, err := set.CheckAs(inNS, gvk, c.Object)
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
	x := executor{engine: r.Engine}
	if r.Recorder != nil {
		x.event = func(s render.Step) {
			r.Recorder.Eventf(t, nil, s.Event.Type, s.Event.Reason, s.Event.Action, "%s", s.Event.Message)
		}
	}
	done, err := x.run(ctx, plan)
	if err != nil {
		return err
	}
	if plan.Problem != "" {
		log.FromContext(ctx).Info(plan.Problem, "networkPolicy", render.NetworkPolicyName(t.Name))
	}
	if done.changes.Changed() {
		log.FromContext(ctx).V(1).Info("applied", "changes", done.changes.String())
	}
	return nil
}
