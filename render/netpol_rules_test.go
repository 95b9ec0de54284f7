package render

import (
	"encoding/json"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/agentsandbox/reconciler/api/convert"
)

// TestSecureRulesAreTheSecurePolicy: the rules the namespace's policy is
// built with are SecureNetworkPolicy's, field for field.
func TestSecureRulesAreTheSecurePolicy(t *testing.T) {
	for _, ns := range []string{"agent-sandbox-system", "other"} {
		spec := SecureNetworkPolicy(ns)
		want := &networkingv1ac.NetworkPolicySpecApplyConfiguration{}
		if err := convert.JSON(networkingv1.NetworkPolicySpec{Ingress: spec.Ingress, Egress: spec.Egress}, want); err != nil {
			t.Fatal(err)
		}
		// The typed spec's pod selector is no pointer: both get the one
		// the namespace's policy sets.
		sel := func() *metav1ac.LabelSelectorApplyConfiguration {
			return metav1ac.LabelSelector().WithMatchLabels(map[string]string{"a": "b"})
		}
		w, _ := json.Marshal(want.WithPodSelector(sel()))
		g, _ := json.Marshal(secureRules(ns).WithPodSelector(sel()))
		if string(w) != string(g) {
			t.Errorf("for %s the rules differ from SecureNetworkPolicy's:\n%s\n%s", ns, g, w)
		}
	}
}
