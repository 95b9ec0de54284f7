package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TemplatePlanInputs is everything a template's reconcile is planned from:
// the template, the NetworkPolicy of its name as observed, and what the
// policies said of the checks of this reconcile's first plan.
type TemplatePlanInputs struct {
	TemplateInputs
	// NetworkPolicy is the NetworkPolicy named NetworkPolicyName(template),
	// whoever owns it; nil when there is none.
	NetworkPolicy *networkingv1.NetworkPolicy
	// Policies reports that policies are in force: the plan lists for them
	// the Sandbox the template makes (what a pool member or a cold claim
	// would be), with the Pod, Service and PVCs it makes (rendered with
	// Defaults), and the NetworkPolicy it is about to create.
	Policies bool
	Defaults Defaults
	// MembersDenied is the policies' denial of the Sandbox the template
	// makes; NetworkPolicyDenied their denial of the new NetworkPolicy.
	MembersDenied, NetworkPolicyDenied string
	// Reported is the refusal of the template's Sandboxes last reported by
	// an event: a template is reported once per refusal, not per reconcile.
	Reported string
}

// TemplateMembersRefused is the message of a refusal of the Sandboxes a
// template makes (why is the denial, or why they cannot be rendered).
func TemplateMembersRefused(why string) string {
	return "Sandboxes made from this template are refused; no pool member or claim Sandbox is created from it: " + why
}

// PlanTemplate decides a template's reconcile: the event reporting that
// the Sandboxes it makes are refused (templates have no status; the pools
// and claims that use it create nothing from it and say so in theirs), the
// ref-hash label on the template, and its shared NetworkPolicy: applied,
// deleted under networkPolicyManagement Unmanaged, or left alone when
// another owner holds the name (the plan's Problem) or the policies deny
// creating it (a Warning event). It returns the plan and the refusal of
// the template's Sandboxes ("" when there is none), which the reconciler
// remembers as reported. A template that cannot be rendered is the plan's
// Problem, met after the refusal is reported.
func PlanTemplate(in TemplatePlanInputs) (Plan, string) {
	t := in.Template
	plan := Plan{Steps: []Step{}}
	if t == nil {
		plan.Problem = "the template cannot be rendered: no template"
		return plan, ""
	}
	refused, reason := "", sandboxv1beta1.ReasonPolicyDenied
	if in.Policies {
		checks, err := NewSandboxChecks(TemplateProbe(t), in.Defaults)
		if err != nil {
			refused, reason = TemplateMembersRefused(err.Error()), extv1beta1.ReasonReconcilerError
		} else {
			checks[0].Reason = "a Sandbox made from the template (a pool member, a cold claim)"
			plan.Checks = checks
		}
	}
	if in.MembersDenied != "" {
		refused = TemplateMembersRefused(in.MembersDenied)
	}
	if refused != "" && refused != in.Reported {
		plan.Steps = append(plan.Steps, templateEvent(t, reason, refused, "the template's Sandboxes are refused"))
	}
	desired, err := Template(in.TemplateInputs)
	if err != nil {
		plan.Problem = "the template cannot be rendered: " + err.Error()
		return plan, refused
	}
	plan.Steps = append(plan.Steps, Step{Action: ActionApply, Kind: "SandboxTemplate", Namespace: t.Namespace, Name: t.Name,
		Reason: "label the template with its ref hash", Object: desired.Labels, Live: t})
	np := in.NetworkPolicy
	owned := np != nil && sandboxv1beta1.IsControlledBy(np, t, extv1beta1.TemplateKind)
	switch {
	case desired.NetworkPolicy != nil && np != nil && !owned:
		plan.Problem = "a NetworkPolicy with the template's policy name exists that the template does not own; leaving it"
	case desired.NetworkPolicy != nil && np == nil:
		if in.Policies {
			plan.Checks = append(plan.Checks, Check{Kind: "NetworkPolicy", Name: *desired.NetworkPolicy.Name,
				Reason: "new NetworkPolicy", Object: desired.NetworkPolicy})
		}
		if in.NetworkPolicyDenied != "" {
			plan.Steps = append(plan.Steps, templateEvent(t, sandboxv1beta1.ReasonPolicyDenied,
				"NetworkPolicy not created: "+in.NetworkPolicyDenied, "the policies denied the NetworkPolicy"))
			break
		}
		plan.Steps = append(plan.Steps, Step{Action: ActionApply, Kind: "NetworkPolicy", Namespace: t.Namespace,
			Name: *desired.NetworkPolicy.Name, Reason: "create the template's NetworkPolicy", Object: desired.NetworkPolicy})
	case desired.NetworkPolicy != nil:
		plan.Steps = append(plan.Steps, Step{Action: ActionApply, Kind: "NetworkPolicy", Namespace: t.Namespace,
			Name: np.Name, Reason: "keep the template's NetworkPolicy as rendered", Object: desired.NetworkPolicy, Live: np})
	case desired.DeleteNetworkPolicy && owned:
		plan.Steps = append(plan.Steps, Step{Action: ActionDelete, Kind: "NetworkPolicy", Namespace: np.Namespace, Name: np.Name,
			Reason:        "delete the template's NetworkPolicy: networkPolicyManagement is Unmanaged",
			Preconditions: &Preconditions{UID: np.UID}, Live: np})
	}
	return plan, refused
}

func templateEvent(t *extv1beta1.SandboxTemplate, reason, message, why string) Step {
	return Step{Action: ActionEvent, Kind: "SandboxTemplate", Namespace: t.Namespace, Name: t.Name, Reason: why,
		Event: &Event{Type: corev1.EventTypeWarning, Reason: reason, Action: "Check", Message: message}}
}
