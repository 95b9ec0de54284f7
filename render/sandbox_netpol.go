package render

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// SandboxNetworkPolicyName is the name of a Sandbox's own NetworkPolicy:
// the Sandbox's, as its Pod's and Service's.
func SandboxNetworkPolicyName(sandbox string) string { return sandbox }

// SandboxSelector is what every selector of a Sandbox's Pod the controller
// owns matches: upstream's name hash and, because a 32-bit hash of a name
// collides (another Sandbox's name, found in seconds, hashes the same),
// the Sandbox's UID.
func SandboxSelector(sb *sandboxv1beta1.Sandbox) map[string]string {
	return map[string]string{
		sandboxv1beta1.LabelSandboxNameHash: NameHash(sb.Name),
		sandboxv1beta1.LabelSandboxUID:      string(sb.UID),
	}
}

// MadeFromTemplate reports a Sandbox a SandboxClaim or SandboxWarmPool
// made from a SandboxTemplate: controlled by one of those kinds of the
// extensions group, and labelled with the template's ref hash. The
// template's NetworkPolicy, or under its networkPolicyManagement
// Unmanaged its author's, governs its Pod; a policy of its own next to
// that one would widen it (NetworkPolicies add up), so it gets none.
// A Sandbox that outlives its template (SandboxInputs.TemplateGone) gets
// its own. (That no user can make a Sandbox look controlled by a claim or a
// pool is the admission webhook's ownership guard.)
func MadeFromTemplate(sb *sandboxv1beta1.Sandbox) bool {
	return sb.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash] != "" &&
		(extv1beta1.ClaimOf(sb) != nil || extv1beta1.PoolOf(sb) != nil)
}

// NetworkPolicyUnmanaged reports a Sandbox whose annotation
// agents.x-k8s.io/network-policy-management is Unmanaged: its user manages
// its Pod's NetworkPolicies. Any other value is Managed: a typo never
// opens a Sandbox.
func NetworkPolicyUnmanaged(sb *sandboxv1beta1.Sandbox) bool {
	return sb.Annotations[sandboxv1beta1.AnnotationNetworkPolicyManagement] == string(extv1beta1.NetworkPolicyManagementUnmanaged)
}

// sandboxNetworkPolicy renders the default-deny NetworkPolicy of a Sandbox
// not made from a template: the rules a template gets when it names none
// (SecureNetworkPolicy: ingress only from the sandbox router's Pods,
// egress to public addresses and the cluster's DNS), selecting the
// Sandbox's Pod by name hash and UID.
func sandboxNetworkPolicy(sb *sandboxv1beta1.Sandbox, controllerNamespace string, owner *metav1ac.OwnerReferenceApplyConfiguration) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	spec := SecureNetworkPolicy(controllerNamespace)
	rules := &networkingv1ac.NetworkPolicySpecApplyConfiguration{}
	if err := convert.JSON(networkingv1.NetworkPolicySpec{Ingress: spec.Ingress, Egress: spec.Egress}, rules); err != nil {
		return nil, fmt.Errorf("render: network policy rules: %w", err)
	}
	rules.WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SandboxSelector(sb))).
		WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	return networkingv1ac.NetworkPolicy(SandboxNetworkPolicyName(sb.Name), sb.Namespace).
		WithLabels(SandboxSelector(sb)).
		WithOwnerReferences(owner).
		WithSpec(rules), nil
}

// networkPolicy plans the Sandbox's own NetworkPolicy, before its Pod, so
// a Pod never runs without it: created, kept as rendered, or deleted when
// the Sandbox no longer wants one (Unmanaged). One with its name that the
// Sandbox does not control stops the plan: the Pod is not created
// unprotected. It reports false when it stopped.
func (p *sandboxPlanner) networkPolicy(desired SandboxDesired) bool {
	in, sb := p.in, p.sb
	live := in.NetworkPolicy
	owned := live != nil && metav1.IsControlledBy(live, sb)
	switch {
	case desired.NetworkPolicy != nil && live != nil && !owned:
		p.stop(fmt.Sprintf("NetworkPolicy %q exists and is not controlled by sandbox %q; the Pod is not started without its NetworkPolicy: delete or rename that NetworkPolicy, or annotate the Sandbox %s=%s to manage its policies yourself",
			live.Name, sb.Name, sandboxv1beta1.AnnotationNetworkPolicyManagement, extv1beta1.NetworkPolicyManagementUnmanaged))
		return false
	case desired.NetworkPolicy != nil:
		step := Step{Action: ActionApply, Kind: "NetworkPolicy", Namespace: sb.Namespace, Name: *desired.NetworkPolicy.Name,
			Reason: "create the Sandbox's default-deny NetworkPolicy", Object: desired.NetworkPolicy}
		if live != nil {
			step.Reason, step.Live = "keep the Sandbox's NetworkPolicy as rendered", live
		}
		p.add(step)
	case desired.DeleteNetworkPolicy && owned:
		why := "the Sandbox's NetworkPolicy is Unmanaged"
		if !NetworkPolicyUnmanaged(sb) {
			why = "the Sandbox's template governs its Pod"
		}
		p.add(Step{Action: ActionDelete, Kind: "NetworkPolicy", Namespace: live.Namespace, Name: live.Name,
			Reason: "delete NetworkPolicy: " + why, Preconditions: &Preconditions{UID: live.UID}, Live: live})
	}
	return true
}
