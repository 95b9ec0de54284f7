package extensions

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// collidingTemplateNames finds two template names with the same 32-bit
// ref hash by a birthday search (tens of thousands of hashes).
func collidingTemplateNames(t *testing.T) (string, string) {
	t.Helper()
	seen := map[string]string{}
	for i := range 10_000_000 {
		name := "t-" + strconv.FormatInt(int64(i), 36)
		if other, ok := seen[render.NameHash(name)]; ok {
			return other, name
		}
		seen[render.NameHash(name)] = name
	}
	t.Fatal("no colliding names found")
	return "", ""
}

// policySelects reports whether the template's NetworkPolicy selects pod.
func policySelects(t *testing.T, ns, template string, pod *corev1.Pod) (bool, error) {
	t.Helper()
	np, err := get(t, ns, render.NetworkPolicyName(template), &networkingv1.NetworkPolicy{})
	if err != nil {
		return false, err
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(pod.Labels)), nil
}

// TestTemplateNetworkPolicyCollisionFree: two templates whose names hash
// alike (the ref hash is 32 bits); each one's NetworkPolicy selects its own
// pool member's Pod and not the other's, and a Pod anyone labels with the
// ref hash does not keep the policy on the hash alone. While a Pod of a
// Sandbox made from the template lacks the collision-free label (made
// before an upgrade), the policy selects on the ref hash alone, so that Pod
// is not left outside it; once that Pod is gone the policy narrows again.
func TestTemplateNetworkPolicyCollisionFree(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	a, b := collidingTemplateNames(t)
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
			Labels: map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: render.NameHash(a)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo"}}},
	}
	create(t, forged, newTemplate(ns, a), newTemplate(ns, b), newPool(ns, "pa", a, 1), newPool(ns, "pb", b, 1))
	_, ma := waitPool(t, ns, "pa", 1)
	_, mb := waitPool(t, ns, "pb", 1)
	pod := func(name string) *corev1.Pod {
		t.Helper()
		var p *corev1.Pod
		eventually(t, "Pod "+name+" with its template's key", func() error {
			var err error
			if p, err = get(t, ns, name, &corev1.Pod{}); err != nil {
				return err
			}
			if p.Labels[sandboxv1beta1.LabelSandboxTemplateRefSHA256] == "" {
				return fmt.Errorf("labels %v", p.Labels)
			}
			return nil
		})
		return p
	}
	pa, pb := pod(ma[0].Name), pod(mb[0].Name)
	// Each template's policy: its own member, not the other's, not the forged Pod.
	check := func(template string, own *corev1.Pod, others ...*corev1.Pod) func() error {
		return func() error {
			ok, err := policySelects(t, ns, template, own)
			if err != nil || !ok {
				return fmt.Errorf("the policy of %s does not select its member %s (%w)", template, own.Name, err)
			}
			for _, o := range others {
				if ok, err := policySelects(t, ns, template, o); err != nil || ok {
					return fmt.Errorf("the policy of %s selects Pod %s (labels %v; %w)", template, o.Name, o.Labels, err)
				}
			}
			return nil
		}
	}
	eventually(t, a+"'s policy: its member only", check(a, pa, pb, forged))
	eventually(t, b+"'s policy: its member only", check(b, pb, pa, forged))

	// A Pod of a's member from before the upgrade: controlled by the
	// member, without the key. (The member then controls two Pods, so the
	// Sandbox controller fails closed and does not relabel it.)
	legacy := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy",
			Labels:          map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: render.NameHash(a)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&ma[0], sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo"}}},
	}
	create(t, legacy)
	eventually(t, a+"'s policy still selects the unlabelled Pod of its member", func() error {
		if ok, err := policySelects(t, ns, a, legacy); err != nil || !ok {
			return errors.Join(errors.New("not selected"), err)
		}
		return nil
	})
	if err := env.Client.Delete(ctxFor(t), legacy); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, a+"'s policy narrowed again once the unlabelled Pod is gone", check(a, pa, pb, forged))
}

// TestSandboxOutlivingItsTemplateFallsUnderTheDefaultDeny: a pool member
// is governed by its template's NetworkPolicy and not by the namespace's
// default-deny one; once the template (and its policy with it) is gone,
// its Pod falls under the namespace's default-deny NetworkPolicy (owned by
// the Namespace), and leaves it again when the template is back (the
// default-deny next to the template's would widen it).
func TestSandboxOutlivingItsTemplateFallsUnderTheDefaultDeny(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 1))
	_, members := waitPool(t, ns, "pool", 1)
	m := members[0]
	eventually(t, "the template's NetworkPolicy", func() error {
		_, err := get(t, ns, render.NetworkPolicyName("tpl"), &networkingv1.NetworkPolicy{})
		return err
	})
	covered := func() (bool, error) { return env.UnderNamespacePolicy(ctxFor(t), ns, m.Name) }
	if in, err := covered(); err != nil || in {
		t.Fatalf("a member governed by its template falls under the default-deny policy (%v, %v)", in, err)
	}
	if _, err := get(t, ns, m.Name, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a member has a NetworkPolicy of its own (%v)", err)
	}
	if err := env.Client.Delete(ctxFor(t), newTemplate(ns, "tpl")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the member's Pod under the namespace's default-deny policy", func() error {
		if in, err := covered(); err != nil || !in {
			return fmt.Errorf("covered %v (%w)", in, err)
		}
		return nil
	})
	create(t, newTemplate(ns, "tpl"))
	eventually(t, "the member's Pod out of the default-deny policy once the template is back", func() error {
		if in, err := covered(); err != nil || in {
			return fmt.Errorf("covered %v (%w)", in, err)
		}
		return nil
	})
}
