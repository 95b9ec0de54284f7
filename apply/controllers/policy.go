package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

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
// ones policies judge; what exists was admitted before): see
// render.NewChildren.
type creating struct {
	pod, service bool
	pvcs         map[string]bool // by PVC name
	// adopt is an existing Pod the Sandbox is about to take over, judged as
	// adoption will leave it (bindings select sandbox Pods by label).
	adopt *corev1.Pod
}

// checkSandbox checks a Sandbox and the objects it is about to create. It
// returns a *policyError on a denial; Warn and Audit decisions are returned
// for the caller to report.
func checkSandbox(ctx context.Context, set *policy.Set, sb *sandboxv1beta1.Sandbox, desired render.SandboxDesired, c creating) ([]policy.Decision, error) {
	return checkPlanned(ctx, set, render.SandboxChecks(sb, desired, render.NewChildren{Pod: c.pod, Service: c.service, PVCs: c.pvcs, Adopt: c.adopt}))
}

// checkPlanned checks, in order, the objects a plan has the policies judge.
// It returns a *policyError on a denial; Warn and Audit decisions are
// returned for the caller to report.
func checkPlanned(ctx context.Context, set *policy.Set, checks []render.Check) ([]policy.Decision, error) {
	if set == nil {
		return nil, nil
	}
	var all []policy.Decision
	adopting := false
	for _, c := range checks {
		gvk, ok := c.GVK()
		if !ok {
			return nil, fmt.Errorf("policy: no kind %q to check %s as", c.Kind, c.Name)
		}
		ds, err := set.CheckAs(ctx, gvk, c.Object)
		all = append(all, ds...)
		if err != nil {
			return nil, err
		}
		if c.Adopt {
			adopting = len(policy.Denied(ds)) > 0
		}
	}
	metrics.ObserveDecisions(all)
	if denied := policy.Denied(all); len(denied) > 0 {
		return all, &policyError{decisions: denied, adopting: adopting}
	}
	return all, nil
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
	checks, err := render.NewSandboxChecks(sb, d)
	if err != nil {
		// Nothing is created from what cannot be rendered, and only a
		// change to it helps.
		return &terminalError{err.Error()}
	}
	_, err = checkPlanned(ctx, set, checks)
	return err
}
