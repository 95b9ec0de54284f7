package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// namespacePolicy returns the namespace's default-deny NetworkPolicy when
// the Namespace (by UID) owns it and it selects the Pod name.
func namespacePolicy(t *testing.T, ns, pod string) (*networkingv1.NetworkPolicy, error) {
	t.Helper()
	switch under, err := env.UnderNamespacePolicy(ctxFor(t), ns, pod); {
	case err != nil:
		return nil, err
	case !under:
		return nil, fmt.Errorf("the namespace's policy does not select Pod %s", pod)
	}
	return get(t, ns, render.NamespaceNetworkPolicyName, &networkingv1.NetworkPolicy{})
}

// allowAll is a NetworkPolicy that admits everything to every Pod.
func allowAll(ns, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// TestNamespacePolicyForgedByAUser plays a user who pre-creates an
// allow-all NetworkPolicy under the name of the namespace's default-deny
// one, once without an owner and once naming the Namespace as owner with a
// made-up UID, hoping the controller takes it for its own: no Pod is
// created (the Sandbox says why), and once the forgery is deleted the
// Sandbox starts under the real policy, owned by the Namespace by UID.
func TestNamespacePolicyForgedByAUser(t *testing.T) {
	for _, forged := range []struct {
		name   string
		owners []metav1.OwnerReference
	}{
		{"no owner", nil},
		{"the namespace's name with another uid", []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "", UID: types.UID("00000000-0000-4000-8000-000000000bad")}}},
	} {
		t.Run(forged.name, func(t *testing.T) {
			ns := env.Namespace(t)
			np := allowAll(ns, render.NamespaceNetworkPolicyName)
			np.OwnerReferences = forged.owners
			for i := range np.OwnerReferences {
				np.OwnerReferences[i].Name = ns
			}
			if err := env.Client.Create(ctxFor(t), np); err != nil {
				t.Fatal(err)
			}
			create(t, newSandbox(ns, "victim"))
			sb := waitCondition(t, ns, "victim", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)
			if c := condition(sb, sandboxv1beta1.ConditionReady); !strings.Contains(c.Message, "is not owned by namespace") {
				t.Errorf("Ready message %q, want it to say the policy is not the namespace's", c.Message)
			}
			if _, err := get(t, ns, "victim", &corev1.Pod{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a Pod was created next to a forged policy (%v)", err)
			}
			if err := env.Client.Delete(ctxFor(t), np); err != nil {
				t.Fatal(err)
			}
			playKubelet(t, ns, "victim")
			waitCondition(t, ns, "victim", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
			real, err := namespacePolicy(t, ns, "victim")
			if err != nil {
				t.Fatal(err)
			}
			if len(real.Spec.Ingress) != 1 || len(real.Spec.Ingress[0].From) == 0 {
				t.Errorf("ingress %+v, want only the router's Pods", real.Spec.Ingress)
			}
		})
	}
}

// TestNamespacePolicyRestored: the namespace's default-deny policy,
// deleted by someone, is made again while its Sandboxes run.
func TestNamespacePolicyRestored(t *testing.T) {
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b"} {
		create(t, newSandbox(ns, name))
		playKubelet(t, ns, name)
	}
	var first *networkingv1.NetworkPolicy
	eventually(t, "the namespace's policy selects both Pods", func() error {
		var err error
		if first, err = namespacePolicy(t, ns, "a"); err != nil {
			return err
		}
		_, err = namespacePolicy(t, ns, "b")
		return err
	})
	if err := env.Client.Delete(ctxFor(t), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace's policy made again", func() error {
		np, err := namespacePolicy(t, ns, "a")
		if err != nil {
			return err
		}
		if np.UID == first.UID {
			return errors.New("not deleted yet")
		}
		return nil
	})
}

// TestOwnNetworkPolicyOfAnEarlierReleaseGoes: the NetworkPolicy of its
// own an earlier release made for a running Sandbox (named after it,
// controlled by it) is deleted once the namespace's policy covers its Pod
// (the golden cases networkpolicy-legacy-* pin the order); a policy the
// Sandbox does not control is left alone, and an Unmanaged Sandbox's Pod is
// not labelled for the namespace's policy.
func TestOwnNetworkPolicyOfAnEarlierReleaseGoes(t *testing.T) {
	ns := env.Namespace(t)
	sb := create(t, newSandbox(ns, "old"))
	playKubelet(t, ns, "old")
	waitCondition(t, ns, "old", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	eventually(t, "the Pod under the namespace's policy", func() error {
		_, err := namespacePolicy(t, ns, "old")
		return err
	})
	own := allowAll(ns, "old")
	own.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}
	other := allowAll(ns, "other-policy")
	if err := errors.Join(env.Client.Create(ctxFor(t), own), env.Client.Create(ctxFor(t), other)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the own policy deleted", func() error {
		if _, err := get(t, ns, "old", &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if _, err := get(t, ns, "other-policy", &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("a policy the Sandbox does not control: %v", err)
	}

	create(t, newSandbox(ns, "byo", func(s *sandboxv1beta1.Sandbox) {
		s.Annotations = map[string]string{sandboxv1beta1.AnnotationNetworkPolicyManagement: "Unmanaged"}
	}))
	playKubelet(t, ns, "byo")
	waitCondition(t, ns, "byo", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	if p, _ := get(t, ns, "byo", &corev1.Pod{}); p.Labels[sandboxv1beta1.LabelNetworkPolicy] != "" {
		t.Errorf("an Unmanaged Sandbox's Pod is labelled %v", p.Labels)
	}
	if _, err := namespacePolicy(t, ns, "byo"); err == nil {
		t.Errorf("the namespace's policy selects an Unmanaged Sandbox's Pod")
	}
}
