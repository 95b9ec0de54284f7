package render

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// NamespaceNetworkPolicyName is the name of the one default-deny
// NetworkPolicy the controller keeps in a namespace with Sandboxes not made
// from a template. It selects their Pods by the label
// agents.x-k8s.io/network-policy=default-deny.
const NamespaceNetworkPolicyName = "agent-sandbox-default-deny"

// SandboxNetworkPolicyName is the name of the NetworkPolicy of a single
// Sandbox that earlier releases made (named after the Sandbox, controlled
// by it); the controller deletes it once the namespace's policy covers the
// Sandbox's Pod.
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
// Unmanaged its author's, governs its Pod; the default-deny policy next to
// that one would widen it (NetworkPolicies add up), so its Pod is not
// labelled for it. A Sandbox that outlives its template
// (SandboxInputs.TemplateGone) is. (That no user can make a Sandbox look
// controlled by a claim or a pool is the admission webhook's ownership
// guard.)
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

// DefaultDeny reports a Sandbox whose Pod falls under the namespace's
// default-deny NetworkPolicy: Managed, and no template governs it.
func DefaultDeny(sb *sandboxv1beta1.Sandbox, templateGone bool) bool {
	return !NetworkPolicyUnmanaged(sb) && (!MadeFromTemplate(sb) || templateGone)
}

// NamespaceOwner is the owner reference of a namespace's default-deny
// NetworkPolicy: the Namespace object, by UID, so that the policy goes with
// its namespace and one that names another owner is not taken for ours.
func NamespaceOwner(namespace string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: namespaceKind.Kind, Name: namespace, UID: uid}
}

// namespaceKind is the Namespace's API group (core) and kind.
var namespaceKind = schema.GroupKind{Kind: "Namespace"}

// OwnedByNamespace reports a NetworkPolicy whose owners include its own
// Namespace object: group (core), kind, the namespace's name, and uid.
func OwnedByNamespace(np *networkingv1.NetworkPolicy, uid types.UID) bool {
	if uid == "" {
		return false
	}
	for _, o := range np.OwnerReferences {
		if sandboxv1beta1.RefersTo(o, namespaceKind) && o.Name == np.Namespace && o.UID == uid {
			return true
		}
	}
	return false
}

// NamespaceNetworkPolicy renders a namespace's default-deny NetworkPolicy:
// the rules a template gets when it names none (SecureNetworkPolicy:
// ingress only from the sandbox router's Pods, egress to public addresses
// and the cluster's DNS), selecting the Pods labelled
// agents.x-k8s.io/network-policy=default-deny, owned by the Namespace (uid;
// empty renders no owner: a rendering that does not know it).
func NamespaceNetworkPolicy(namespace string, uid types.UID, controllerNamespace string) *networkingv1ac.NetworkPolicyApplyConfiguration {
	rules := secureRules(controllerNamespace)
	rules.WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{
		sandboxv1beta1.LabelNetworkPolicy: sandboxv1beta1.NetworkPolicyDefaultDeny,
	})).WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	np := networkingv1ac.NetworkPolicy(NamespaceNetworkPolicyName, namespace).WithSpec(rules)
	if uid != "" {
		o := NamespaceOwner(namespace, uid)
		np.WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(o.APIVersion).WithKind(o.Kind).WithName(o.Name).WithUID(o.UID))
	}
	return np
}

// networkPolicy plans the namespace's default-deny NetworkPolicy before the
// Pod, so a Pod labelled for it never runs without it: created, or kept as
// rendered. One with its name that the Namespace does not own stops the
// plan: the Pod is not created unprotected. It also deletes the
// Sandbox's own NetworkPolicy from an earlier release once it is not
// needed: at once when the Sandbox wants no default-deny policy, and
// otherwise once the namespace's is in place and the Pod, if any, carries
// the label. It reports false when it stopped.
func (p *sandboxPlanner) networkPolicy(desired SandboxDesired) bool {
	in, sb := p.in, p.sb
	shared := in.NamespacePolicy
	// An earlier release's policy of a Sandbox named like the namespace's:
	// applying over it makes it the namespace's (owner and selector
	// change). Its running Pod is labelled first, so that it stays covered
	// throughout: the policy is taken over by the plan after that.
	legacyShared := shared != nil && sandboxv1beta1.IsControlledBy(shared, sb, sandboxv1beta1.SandboxKind)
	podUnlabelled := in.Pod != nil && in.Pod.Labels[sandboxv1beta1.LabelNetworkPolicy] != sandboxv1beta1.NetworkPolicyDefaultDeny
	if desired.NetworkPolicy != nil && (!legacyShared || !podUnlabelled) {
		if shared != nil && !legacyShared && !OwnedByNamespace(shared, in.NamespaceUID) {
			p.stop(fmt.Sprintf("NetworkPolicy %q exists and is not owned by namespace %q; the Pod is not started without the namespace's default-deny NetworkPolicy: delete or rename that NetworkPolicy, or annotate the Sandbox %s=%s to manage its policies yourself",
				shared.Name, sb.Namespace, sandboxv1beta1.AnnotationNetworkPolicyManagement, extv1beta1.NetworkPolicyManagementUnmanaged))
			return false
		}
		step := Step{Action: ActionApply, Kind: "NetworkPolicy", Namespace: sb.Namespace, Name: *desired.NetworkPolicy.Name,
			Reason: "create the namespace's default-deny NetworkPolicy", Object: desired.NetworkPolicy}
		if shared != nil {
			step.Reason, step.Live = "keep the namespace's default-deny NetworkPolicy as rendered", shared
		}
		p.add(step)
	}
	own := in.NetworkPolicy
	if own == nil || !sandboxv1beta1.IsControlledBy(own, sb, sandboxv1beta1.SandboxKind) || own.Name == NamespaceNetworkPolicyName {
		return true
	}
	why := "the Sandbox's NetworkPolicy is Unmanaged"
	switch {
	case desired.NetworkPolicy != nil:
		covered := shared != nil && !legacyShared && !podUnlabelled
		if !covered {
			return true // next time: the Pod is labelled and the namespace's policy is in place
		}
		why = "the namespace's default-deny NetworkPolicy covers the Pod"
	case !NetworkPolicyUnmanaged(sb):
		why = "the Sandbox's template governs its Pod"
	}
	p.add(Step{Action: ActionDelete, Kind: "NetworkPolicy", Namespace: own.Namespace, Name: own.Name,
		Reason: "delete the Sandbox's own NetworkPolicy: " + why, Preconditions: &Preconditions{UID: own.UID}, Live: own})
	return true
}

// TemplatePolicyState is the state of a template's NetworkPolicy, as the
// plan of a Sandbox made from that template needs it.
type TemplatePolicyState int

const (
	// TemplatePolicyInPlace: the template's NetworkPolicy exists and is
	// the template's, or it is not what governs the Sandbox's Pod (no
	// template, a template gone, Unmanaged policies).
	TemplatePolicyInPlace TemplatePolicyState = iota
	// TemplatePolicyMissing: there is none yet (the template's reconciler
	// makes it; a template and its pool applied together race it).
	TemplatePolicyMissing
	// TemplatePolicyForeign: a NetworkPolicy of its name exists that the
	// template does not control; the template leaves it.
	TemplatePolicyForeign
)

// templatePolicy holds back a new Pod that its template's NetworkPolicy
// does not protect yet: labelled for the template's policy and not for the
// namespace's default deny, such a Pod would run under no NetworkPolicy at
// all. While the policy is missing the Pod waits (no step; the status says
// it has none yet, and the policy's creation brings the Sandbox back);
// with a foreign one in its place the plan stops with what to do. A Pod
// that exists is never held. It reports false when it stopped.
func (p *sandboxPlanner) templatePolicy(desired SandboxDesired) bool {
	in, sb := p.in, p.sb
	if in.TemplatePolicy == TemplatePolicyInPlace || desired.Pod == nil || in.Pod != nil || in.ForeignPod != nil {
		return true
	}
	template := sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef]
	if in.TemplatePolicy == TemplatePolicyForeign {
		p.stop(fmt.Sprintf("NetworkPolicy %q exists and is not owned by SandboxTemplate %q; the Pod is not started without its template's NetworkPolicy: delete or rename that NetworkPolicy, and the template makes its own",
			NetworkPolicyName(template), template))
		return false
	}
	p.holdPod = true
	return true
}
