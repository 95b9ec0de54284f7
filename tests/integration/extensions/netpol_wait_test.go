package extensions

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// TestNoMemberPodUnderAForeignTemplatePolicy plays a user who makes a
// NetworkPolicy of a template's policy name, allowing everything and
// selecting nothing, before the template and its pool are applied: the
// template leaves that policy, and a member's Pod, labelled for the
// template's policy and not for the namespace's default deny, would run
// under no policy at all. No member gets a Pod while it is there, and the
// member says why; once it is deleted the template makes its own and the
// members start.
func TestNoMemberPodUnderAForeignTemplatePolicy(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	squat := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: render.NetworkPolicyName("tpl")},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"nothing": "selected"}}}}
	create(t, squat, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))

	var member string
	eventually(t, "a member that says why it has no Pod", func() error {
		var list sandboxv1beta1.SandboxList
		if err := env.Client.List(ctxFor(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			for _, c := range sb.Status.Conditions {
				if c.Type == sandboxv1beta1.ConditionReady && strings.Contains(c.Message, "is not owned by SandboxTemplate \"tpl\"") {
					member = sb.Name
					return nil
				}
			}
		}
		return fmt.Errorf("%d Sandboxes, none saying so", len(list.Items))
	})
	time.Sleep(time.Second) // what a reconcile would do meanwhile, it did
	var pods corev1.PodList
	if err := env.Client.List(ctxFor(t), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("Pods started under no NetworkPolicy: %s and %d more", pods.Items[0].Name, len(pods.Items)-1)
	}

	if err := env.Client.Delete(ctxFor(t), squat); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the template's own policy", func() error {
		np, err := get(t, ns, render.NetworkPolicyName("tpl"), &networkingv1.NetworkPolicy{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(np); ref == nil || ref.Kind != "SandboxTemplate" {
			return fmt.Errorf("owners %v", np.OwnerReferences)
		}
		return nil
	})
	eventually(t, "the member's Pod", func() error {
		_, err := get(t, ns, member, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no Pod %s yet", member)
		}
		return err
	})
	waitPool(t, ns, "pool", 1)
}
