package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// observed is what a reconcile reads from the cache.
type observed struct {
	pods       []*corev1.Pod                   // Pods this Sandbox controls
	pod        *corev1.Pod                     // the Pod to keep: owned, or about to be adopted
	adopt      bool                            // pod is unowned and may be adopted
	podOwned   *corev1ac.PodApplyConfiguration // what our field manager owns of pod
	foreignPod *corev1.Pod                     // a Pod with our pod name that we may not take
	foreignSvc *corev1.Service                 // a Service with our name that we may not take
	service    *corev1.Service                 // our Service
	pvcs       map[string]*corev1.PersistentVolumeClaim
	netpol     *networkingv1.NetworkPolicy // the NetworkPolicy named after the Sandbox, whoever owns it
	nsPolicy   *networkingv1.NetworkPolicy // the namespace's default-deny NetworkPolicy, whoever owns it
	nsUID      types.UID                   // the Sandbox's Namespace's, when its Pod falls under that policy
	// templateGone: the Sandbox was made from a template that is gone
	// (or it names none).
	templateGone bool
	// templatePolicy: the state of that template's NetworkPolicy, looked
	// at while the Sandbox has no Pod (render.TemplatePolicyState).
	templatePolicy render.TemplatePolicyState
}

// podNamed reads the Pod of a name in sb's namespace, nil when there is
// none: for sb's own name, the one podsControlledBy read already (named).
func (r *SandboxReconciler) podNamed(ctx context.Context, sb *sandboxv1beta1.Sandbox, name string, named *corev1.Pod) (*corev1.Pod, error) {
	if name == sb.Name {
		return named, nil
	}
	p := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return p, nil
}

// observe reads what the plan of sb needs from the cache. wantsPod
// (render.WantsPod) says whether the plan keeps a Pod: what we own of one
// is extracted only then.
func (r *SandboxReconciler) observe(ctx context.Context, sb *sandboxv1beta1.Sandbox, wantsPod bool) (*observed, error) {
	obs := &observed{pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	pods, named, err := podsControlledBy(ctx, r.Client, sb)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	obs.pods = pods
	if len(obs.pods) == 1 {
		obs.pod = obs.pods[0]
	}
	if len(obs.pods) == 0 {
		// The tracked name (pod-name annotation), then the Sandbox's own
		// name, which a new Pod would take.
		names := []string{render.PodName(sb)}
		if names[0] != sb.Name {
			names = append(names, sb.Name)
		}
		for _, name := range names {
			p, err := r.podNamed(ctx, sb, name, named)
			if err != nil {
				return nil, fmt.Errorf("reading pod: %w", err)
			}
			if p == nil {
				continue
			}
			if adoptable(p, sb) {
				obs.pod, obs.adopt = p, true
			} else {
				obs.foreignPod = p
			}
			break
		}
	}
	if obs.pod != nil && wantsPod {
		// A kept Pod keeps the spec it was created with: the plan needs
		// what we own of it. One that goes needs none of it.
		owned, err := ssa.Extract(r.Engine, "Pod", obs.pod, r.Engine.FieldManager(), "", corev1ac.ExtractPod)
		if err != nil {
			return nil, fmt.Errorf("extracting pod fields: %w", err)
		}
		obs.podOwned = owned
	}

	svc := &corev1.Service{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, svc)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading service: %w", err)
	case sandboxv1beta1.IsControlledBy(svc, sb, sandboxv1beta1.SandboxKind) || adoptable(svc, sb):
		obs.service = svc
	default:
		obs.foreignSvc = svc
	}

	np := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: render.SandboxNetworkPolicyName(sb.Name)}, np); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading network policy: %w", err)
	default:
		obs.netpol = np
	}

	if r.Templates && render.MadeFromTemplate(sb) {
		t, err := r.template(ctx, sb)
		if err != nil {
			return nil, err
		}
		obs.templateGone = t == nil
		if t != nil && obs.pod == nil && obs.foreignPod == nil && !render.NetworkPolicyUnmanaged(sb) &&
			t.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyManagementUnmanaged {
			if obs.templatePolicy, err = r.templatePolicy(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	if render.DefaultDeny(sb, obs.templateGone) && r.ControllerNamespace != "" {
		if err := r.observeNamespacePolicy(ctx, sb, obs); err != nil {
			return nil, err
		}
	}

	for _, t := range sb.Spec.VolumeClaimTemplates {
		name := render.PVCName(t.Name, sb.Name)
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, pvc)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading pvc: %w", err)
		default:
			obs.pvcs[name] = pvc
		}
	}
	return obs, nil
}

// observeNamespacePolicy reads the namespace's default-deny NetworkPolicy
// and the UID of the Namespace that owns it.
func (r *SandboxReconciler) observeNamespacePolicy(ctx context.Context, sb *sandboxv1beta1.Sandbox, obs *observed) error {
	np := &networkingv1.NetworkPolicy{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: render.NamespaceNetworkPolicyName}, np); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading the namespace's network policy: %w", err)
	default:
		obs.nsPolicy = np
	}
	ns := namespaceMeta()
	if err := r.Client.Get(ctx, types.NamespacedName{Name: sb.Namespace}, ns); err != nil {
		return fmt.Errorf("reading namespace %s (the owner of its default-deny NetworkPolicy): %w", sb.Namespace, err)
	}
	obs.nsUID = ns.UID
	return nil
}

// namespacePolicyToSandboxes maps an event of a namespace's default-deny
// NetworkPolicy to the Sandboxes in the namespace whose Pods fall under it:
// its creation brings back the Sandbox whose plan created it (a change it
// made, like any child's), and a change or deletion has it restored at
// once (and starts those that waited for a foreign policy of that name to
// go).
func (r *SandboxReconciler) namespacePolicyToSandboxes(ctx context.Context, o client.Object) []reconcile.Request {
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing the sandboxes of a namespace", "namespace", o.GetNamespace())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		sb := &list.Items[i]
		under := render.DefaultDeny(sb, false)
		if !under && r.Templates && render.MadeFromTemplate(sb) && !render.NetworkPolicyUnmanaged(sb) {
			gone, err := r.templateGone(ctx, sb)
			under = err == nil && gone
		}
		if under {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}})
		}
	}
	return out
}

// isNamespacePolicy passes the events of namespaces' default-deny
// NetworkPolicies, and of their updates only those that changed them (a
// new resourceVersion, not a resync).
var isNamespacePolicy = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		return e.Object.GetName() == render.NamespaceNetworkPolicyName
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc: func(e event.DeleteEvent) bool {
		return e.Object.GetName() == render.NamespaceNetworkPolicyName
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectNew.GetName() == render.NamespaceNetworkPolicyName &&
			e.ObjectNew.GetResourceVersion() != e.ObjectOld.GetResourceVersion()
	},
}

// isTemplatePolicy passes the events of NetworkPolicies a SandboxTemplate
// controls, and of their updates only those that changed them.
var isTemplatePolicy = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return templateControlled(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(e event.DeleteEvent) bool { return templateControlled(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return templateControlled(e.ObjectNew) && e.ObjectNew.GetResourceVersion() != e.ObjectOld.GetResourceVersion()
	},
}

func templateControlled(o client.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && sandboxv1beta1.RefersTo(*ref, extv1beta1.TemplateKind)
}

// terminalError is a problem only a user can fix (an invalid spec, an
// object in the way): reported in status, not retried.
type terminalError struct{ msg string }

func (e *terminalError) Error() string { return e.msg }

// adoptable reports whether an object without a controller may be taken over
// by sb (see render.Adoptable).
func adoptable(o client.Object, sb *sandboxv1beta1.Sandbox) bool { return render.Adoptable(o, sb) }

// templateGone reports that the template a Sandbox was made from (its
// sandbox-template-ref annotation) does not exist, or that it names none:
// no template NetworkPolicy governs its Pod.
func (r *SandboxReconciler) templateGone(ctx context.Context, sb *sandboxv1beta1.Sandbox) (bool, error) {
	t, err := r.template(ctx, sb)
	return t == nil && err == nil, err
}

// template reads the template a Sandbox was made from (its
// sandbox-template-ref annotation): nil when it does not exist or the
// Sandbox names none.
func (r *SandboxReconciler) template(ctx context.Context, sb *sandboxv1beta1.Sandbox) (*extv1beta1.SandboxTemplate, error) {
	name := sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef]
	if name == "" {
		return nil, nil
	}
	t := &extv1beta1.SandboxTemplate{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, t)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the sandbox's template: %w", err)
	}
	return t, nil
}

// templatePolicy reads the state of template t's NetworkPolicy: in place
// (controlled by t: group, kind, name and UID), missing, or foreign.
func (r *SandboxReconciler) templatePolicy(ctx context.Context, t *extv1beta1.SandboxTemplate) (render.TemplatePolicyState, error) {
	np := &networkingv1.NetworkPolicy{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: render.NetworkPolicyName(t.Name)}, np)
	switch {
	case apierrors.IsNotFound(err):
		return render.TemplatePolicyMissing, nil
	case err != nil:
		return render.TemplatePolicyInPlace, fmt.Errorf("reading the template's network policy: %w", err)
	case !sandboxv1beta1.IsControlledBy(np, t, extv1beta1.TemplateKind):
		return render.TemplatePolicyForeign, nil
	}
	return render.TemplatePolicyInPlace, nil
}

// templatePolicyToSandboxes maps an event of a NetworkPolicy a
// SandboxTemplate controls (our group and kind) to the Sandboxes made from
// that template: those whose new Pod waits for it start once it is there.
func (r *SandboxReconciler) templatePolicyToSandboxes(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || !sandboxv1beta1.RefersTo(*ref, extv1beta1.TemplateKind) {
		return nil
	}
	t := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: ref.Name}}
	return r.templateToSandboxes(ctx, t)
}

// templateToSandboxes maps a template (created or deleted) to the
// Sandboxes made from it: whether they need a NetworkPolicy of their own
// depends on it.
func (r *SandboxReconciler) templateToSandboxes(ctx context.Context, o client.Object) []reconcile.Request {
	var list sandboxv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingLabels{sandboxv1beta1.LabelSandboxTemplateRefHash: render.NameHash(o.GetName())}); err != nil {
		log.FromContext(ctx).Error(err, "listing the sandboxes of a template", "template", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, sb := range list.Items {
		if sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef] == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}})
		}
	}
	return out
}
