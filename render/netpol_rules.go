package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
)

// secureRules is SecureNetworkPolicy's ingress and egress as an apply
// configuration, built directly: every Sandbox plan renders the namespace's
// default-deny policy, and converting the rules through JSON each time was
// about 3 % of the controller's CPU while 5,000 Sandboxes were suspended.
// TestSecureRulesAreTheSecurePolicy holds the two to the same rules.
func secureRules(controllerNamespace string) *networkingv1ac.NetworkPolicySpecApplyConfiguration {
	dns := intstr.FromInt32(53)
	selector := func(labels map[string]string) *metav1ac.LabelSelectorApplyConfiguration {
		return metav1ac.LabelSelector().WithMatchLabels(labels)
	}
	return networkingv1ac.NetworkPolicySpec().
		WithIngress(networkingv1ac.NetworkPolicyIngressRule().WithFrom(networkingv1ac.NetworkPolicyPeer().
			WithNamespaceSelector(selector(map[string]string{corev1.LabelMetadataName: controllerNamespace})).
			WithPodSelector(selector(map[string]string{RouterLabelKey: RouterLabelValue})))).
		WithEgress(
			networkingv1ac.NetworkPolicyEgressRule().WithTo(
				networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR("0.0.0.0/0").WithExcept(privateIPv4...)),
				networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR("::/0").WithExcept(privateIPv6...))),
			networkingv1ac.NetworkPolicyEgressRule().
				WithTo(networkingv1ac.NetworkPolicyPeer().
					WithNamespaceSelector(selector(map[string]string{corev1.LabelMetadataName: metav1.NamespaceSystem})).
					WithPodSelector(selector(map[string]string{"k8s-app": "kube-dns"}))).
				WithPorts(
					networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolUDP).WithPort(dns),
					networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(dns)))
}
