package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// NetworkPolicyName is the name of a SandboxTemplate's shared NetworkPolicy.
func NetworkPolicyName(template string) string { return template + "-network-policy" }

// RouterLabel selects the pods allowed to reach sandboxes under the secure
// default NetworkPolicy; they run in the controller's namespace.
const (
	RouterLabelKey   = "app"
	RouterLabelValue = "sandbox-router"
)

// Private address ranges the secure default keeps sandboxes from reaching:
// RFC 1918, link-local (cloud metadata), carrier-grade NAT (RFC 6598:
// some clouds' and clusters' internal addresses), IPv6 unique-local and
// link-local.
var (
	privateIPv4 = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"}
	privateIPv6 = []string{"fc00::/7", "fe80::/10"}
)

// TemplateInputs is everything a SandboxTemplate renders from.
type TemplateInputs struct {
	// Template is the object being rendered. Required, with name, namespace and UID.
	Template *extv1beta1.SandboxTemplate
	// ControllerNamespace is where the controller and the sandbox router
	// run; the secure default admits ingress only from routers there.
	ControllerNamespace string
	// LegacyPods reports Pods with the template's ref hash but without the
	// sandbox-template-ref-sha256 label (made before the label existed,
	// not relabelled yet): the NetworkPolicy keeps selecting by ref hash
	// alone until none is left, so an upgrade never leaves a running Pod
	// outside its template's policy.
	LegacyPods bool
}

// TemplateRefSHA256 is the value of the sandbox-template-ref-sha256 label
// for a template name: the first 128 bits of its SHA-256, in hex.
func TemplateRefSHA256(template string) string {
	sum := sha256.Sum256([]byte(template))
	return hex.EncodeToString(sum[:16])
}

// TemplateSelector is what a template's NetworkPolicy selects: upstream's
// 32-bit ref hash, which collides, and the collision-free SHA-256 key.
func TemplateSelector(template string) map[string]string {
	return map[string]string{
		sandboxv1beta1.LabelSandboxTemplateRefHash:   NameHash(template),
		sandboxv1beta1.LabelSandboxTemplateRefSHA256: TemplateRefSHA256(template),
	}
}

// TemplateDesired is what a SandboxTemplate should own.
type TemplateDesired struct {
	// NetworkPolicy is nil under networkPolicyManagement Unmanaged.
	NetworkPolicy *networkingv1ac.NetworkPolicyApplyConfiguration
	// DeleteNetworkPolicy is set under Unmanaged: a policy we own must go.
	DeleteNetworkPolicy bool
	// Labels is the template's own metadata the controller owns: the
	// template-ref hash, so tools can select a template's objects by one label.
	Labels *extac.SandboxTemplateApplyConfiguration
}

// Template renders the shared NetworkPolicy of a SandboxTemplate and the
// label the controller puts on the template.
func Template(in TemplateInputs) (TemplateDesired, error) {
	t := in.Template
	if t == nil || t.Name == "" || t.Namespace == "" || t.UID == "" {
		return TemplateDesired{}, fmt.Errorf("render: template needs a name, namespace and uid")
	}
	hash := NameHash(t.Name)
	out := TemplateDesired{
		Labels: extac.SandboxTemplate(t.Name, t.Namespace).
			WithLabels(map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: hash}),
	}
	if t.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		out.DeleteNetworkPolicy = true
		return out, nil
	}
	var spec extv1beta1.NetworkPolicySpec
	if t.Spec.NetworkPolicy != nil {
		spec = *t.Spec.NetworkPolicy.DeepCopy()
	} else {
		spec = SecureNetworkPolicy(in.ControllerNamespace)
	}
	rules := &networkingv1ac.NetworkPolicySpecApplyConfiguration{}
	if err := convert.JSON(networkingv1.NetworkPolicySpec{Ingress: spec.Ingress, Egress: spec.Egress}, rules); err != nil {
		return TemplateDesired{}, fmt.Errorf("render: network policy rules: %w", err)
	}
	// An empty rule list leaves the direction closed: policyTypes names
	// both directions, so a policy without egress rules denies all egress.
	selector := TemplateSelector(t.Name)
	if in.LegacyPods {
		selector = map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: hash}
	}
	rules.WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
		WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
	out.NetworkPolicy = networkingv1ac.NetworkPolicy(NetworkPolicyName(t.Name), t.Namespace).
		WithLabels(map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: hash}).
		WithOwnerReferences(controllerRef(t, extv1beta1.GroupVersion.WithKind("SandboxTemplate"))).
		WithSpec(rules)
	return out, nil
}

// SecureNetworkPolicy is the policy a template gets when it names none:
// ingress only from sandbox-router pods in the controller's namespace;
// egress to public addresses only, plus DNS to the cluster's kube-dns.
func SecureNetworkPolicy(controllerNamespace string) extv1beta1.NetworkPolicySpec {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	return extv1beta1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: controllerNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{RouterLabelKey: RouterLabelValue}},
			}},
		}},
		Egress: []networkingv1.NetworkPolicyEgressRule{
			{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateIPv4}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: privateIPv6}},
			}},
			{
				To: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: metav1.NamespaceSystem}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
			},
		},
	}
}
