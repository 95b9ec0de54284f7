package controllers

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// EventPolicyDenied is the Warning event for a denial.
const EventPolicyDenied = sandboxv1beta1.ReasonPolicyDenied

// EventPolicyWarning is the Warning event for what a bundle in warn mode
// would have denied; the objects are created.
const EventPolicyWarning = "PolicyWarning"

var (
	gvkSandbox       = sandboxv1beta1.GroupVersion.WithKind("Sandbox")
	gvkPod           = corev1.SchemeGroupVersion.WithKind("Pod")
	gvkService       = corev1.SchemeGroupVersion.WithKind("Service")
	gvkPVC           = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	gvkNetworkPolicy = networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")
)

// policyError is a denial by policy: terminal until the object or the
// policy changes.
type policyError struct {
	decisions []policy.Decision
	// adopting is set when the denied object is an existing Pod the
	// Sandbox would have adopted.
	adopting bool
}

func (e *policyError) Error() string {
	if e.adopting {
		return "the existing Pod is not adopted: " + policy.Summary(e.decisions)
	}
	return policy.Summary(e.decisions)
}

// creating says which of a Sandbox's objects are about to be created (the
// ones policies judge; what exists was admitted before).
type creating struct {
	pod, service bool
	pvcs         map[string]bool // by PVC name
	// adopt is an existing Pod the Sandbox is about to take over. It was
	// admitted as somebody else's Pod, so it is judged as if it were
	// created now as the Sandbox's: its own spec with the labels and
	// owner reference adoption gives it (bindings select sandbox Pods by
	// label).
	adopt *corev1.Pod
}

// checkSandbox checks a Sandbox and the objects it is about to create. It
// returns a *policyError on a denial; Warn and Audit decisions are returned
// for the caller to report.
func checkSandbox(ctx context.Context, set *policy.Set, sb *sandboxv1beta1.Sandbox, desired render.SandboxDesired, c creating) ([]policy.Decision, error) {
	if set == nil {
		return nil, nil
	}
	var all []policy.Decision
	add := func(ds []policy.Decision, err error) error {
		all = append(all, ds...)
		return err
	}
	if err := add(set.CheckAs(ctx, gvkSandbox, sb)); err != nil {
		return nil, err
	}
	if c.pod && desired.Pod != nil {
		if err := add(set.CheckAs(ctx, gvkPod, desired.Pod)); err != nil {
			return nil, err
		}
	}
	if c.service && desired.Service != nil {
		if err := add(set.CheckAs(ctx, gvkService, desired.Service)); err != nil {
			return nil, err
		}
	}
	for _, p := range desired.PVCs {
		if c.pvcs[*p.Name] {
			if err := add(set.CheckAs(ctx, gvkPVC, p)); err != nil {
				return nil, err
			}
		}
	}
	adopting := false
	if c.adopt != nil {
		before := len(all)
		if err := add(set.CheckAs(ctx, gvkPod, adoptedPod(c.adopt, desired))); err != nil {
			return nil, err
		}
		adopting = len(policy.Denied(all[before:])) > 0
	}
	metrics.ObserveDecisions(all)
	if denied := policy.Denied(all); len(denied) > 0 {
		return all, &policyError{decisions: denied, adopting: adopting}
	}
	return all, nil
}

// adoptedPod is live as it will be once the Sandbox adopts it: its spec
// unchanged, with the rendered Pod's labels, annotations and owner
// references added.
func adoptedPod(live *corev1.Pod, desired render.SandboxDesired) *corev1.Pod {
	p := live.DeepCopy()
	if desired.Pod == nil || desired.Pod.ObjectMetaApplyConfiguration == nil {
		return p
	}
	if desired.Pod.Labels != nil && p.Labels == nil {
		p.Labels = map[string]string{}
	}
	maps.Copy(p.Labels, desired.Pod.Labels)
	if desired.Pod.Annotations != nil && p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	maps.Copy(p.Annotations, desired.Pod.Annotations)
	for _, ref := range desired.Pod.OwnerReferences {
		if ref.APIVersion == nil || ref.Kind == nil || ref.Name == nil || ref.UID == nil {
			continue
		}
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: *ref.APIVersion, Kind: *ref.Kind, Name: *ref.Name, UID: *ref.UID,
			Controller: ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion,
		})
	}
	return p
}

// checkNewSandbox checks a Sandbox the controller is about to create (a
// pool member, a cold claim) together with everything it will create,
// rendered with the defaults in force, in the policy modes of its
// namespace.
func checkNewSandbox(ctx context.Context, h *policy.Holder, sb *sandboxv1beta1.Sandbox, d render.Defaults) error {
	set := h.Get()
	if set == nil {
		return nil
	}
	ctx, _ = h.In(ctx, sb.Namespace)
	probe := sb.DeepCopy()
	if probe.UID == "" {
		probe.UID = types.UID("not-created-yet")
	}
	desired, err := render.Sandbox(render.SandboxInputs{Sandbox: probe, Defaults: d})
	if err != nil {
		// Nothing is created from what cannot be rendered, and only a
		// change to it helps.
		return &terminalError{"rendering for the policy check: " + err.Error()}
	}
	c := creating{pod: true, service: true, pvcs: map[string]bool{}}
	for _, p := range desired.PVCs {
		c.pvcs[*p.Name] = true
	}
	_, err = checkSandbox(ctx, set, sb, desired, c)
	return err
}
