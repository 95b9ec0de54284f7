package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// EventPolicyDenied is the Warning event for a denial.
const EventPolicyDenied = sandboxv1beta1.ReasonPolicyDenied

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
}

func (e *policyError) Error() string { return policy.Summary(e.decisions) }

// creating says which of a Sandbox's objects are about to be created (the
// ones policies judge; what exists was admitted before).
type creating struct {
	pod, service bool
	pvcs         map[string]bool // by PVC name
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
	metrics.ObserveDecisions(all)
	if denied := policy.Denied(all); len(denied) > 0 {
		return all, &policyError{decisions: denied}
	}
	return all, nil
}

// checkNewSandbox checks a Sandbox the controller is about to create (a
// pool member, a cold claim) together with everything it will create.
func checkNewSandbox(ctx context.Context, set *policy.Set, sb *sandboxv1beta1.Sandbox) error {
	if set == nil {
		return nil
	}
	probe := sb.DeepCopy()
	if probe.UID == "" {
		probe.UID = types.UID("not-created-yet")
	}
	desired, err := render.Sandbox(render.SandboxInputs{Sandbox: probe})
	if err != nil {
		return fmt.Errorf("rendering for the policy check: %w", err)
	}
	c := creating{pod: true, service: true, pvcs: map[string]bool{}}
	for _, p := range desired.PVCs {
		c.pvcs[*p.Name] = true
	}
	_, err = checkSandbox(ctx, set, sb, desired, c)
	return err
}
