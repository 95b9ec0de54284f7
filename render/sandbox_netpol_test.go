package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestRelabelledSandboxKeepsItsTemplatePolicy plays a user who edits the
// template ref hash label of a claim's Sandbox made from template tpl, to
// take its Pod out from under tpl's NetworkPolicy (which selects on that
// hash and the collision-free key) while the template still exists, so
// that no default-deny label is added either. The Pod's template labels
// are worked out from the template the Sandbox names, whatever its label
// says; with the label removed, the Pod is also under the namespace's
// default deny.
func TestRelabelledSandboxKeepsItsTemplatePolicy(t *testing.T) {
	claimed := func(hashLabel string) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "team", UID: "sb-uid",
			Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: "tpl"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
				Name: "claim", UID: "claim-uid", Controller: ptr.To(true)}}}}
		if hashLabel != "" {
			sb.Labels = map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: hashLabel}
		}
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
		return sb
	}
	for _, c := range []struct {
		name, label string
		defaultDeny bool
	}{
		{"as the claim made it", NameHash("tpl"), false},
		{"relabelled by hand", "00000000", false},
		{"label removed", "", true},
	} {
		sb := claimed(c.label)
		if got := DefaultDeny(sb, false); got != c.defaultDeny {
			t.Errorf("%s: under the namespace's default deny = %v, want %v", c.name, got, c.defaultDeny)
		}
		out, err := Sandbox(SandboxInputs{Sandbox: sb, PodName: sb.Name})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		labels := out.Pod.Labels
		if labels[sandboxv1beta1.LabelSandboxTemplateRefHash] != NameHash("tpl") || labels[sandboxv1beta1.LabelSandboxTemplateRefSHA256] != TemplateRefSHA256("tpl") {
			t.Errorf("%s: the Pod's template labels are %q and %q, want tpl's %q and %q: its NetworkPolicy no longer selects it",
				c.name, labels[sandboxv1beta1.LabelSandboxTemplateRefHash], labels[sandboxv1beta1.LabelSandboxTemplateRefSHA256],
				NameHash("tpl"), TemplateRefSHA256("tpl"))
		}
		if got := labels[sandboxv1beta1.LabelNetworkPolicy] == sandboxv1beta1.NetworkPolicyDefaultDeny; got != c.defaultDeny {
			t.Errorf("%s: the Pod's default-deny label = %v, want %v", c.name, got, c.defaultDeny)
		}
	}
}

// TestNoPodBeforeItsTemplatePolicy plays a template and its pool applied
// together, and a user who made a NetworkPolicy of the template's policy
// name first: a member's new Pod, labelled for the template's policy and
// not for the namespace's default deny, would run under no policy. While
// the template's policy is missing the plan creates no Pod (nor names
// one) and reports the Sandbox as it is; with a foreign one it stops with
// what to do; once the template's is in place the Pod is created. A Pod
// that exists is never held.
func TestNoPodBeforeItsTemplatePolicy(t *testing.T) {
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "pool-abcde", Namespace: "team", UID: "sb-uid",
		Labels:      map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: NameHash("tpl")},
		Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: "tpl"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool",
			Name: "pool", UID: "pool-uid", Controller: ptr.To(true)}}}}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	steps := func(p Plan, kind string, action Action) int {
		n := 0
		for _, s := range p.Steps {
			if s.Kind == kind && s.Action == action {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name    string
		state   TemplatePolicyState
		pods    int
		problem string
	}{
		{"the template's policy in place", TemplatePolicyInPlace, 1, ""},
		{"the template's policy not made yet", TemplatePolicyMissing, 0, ""},
		{"a foreign policy of its name", TemplatePolicyForeign, 0, `NetworkPolicy "tpl-network-policy" exists and is not owned by SandboxTemplate "tpl"`},
	} {
		plan, err := PlanSandbox(SandboxPlanInputs{Sandbox: sb, TemplatePolicy: c.state, Now: metav1.Now()})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := steps(plan, "Pod", ActionApply); got != c.pods {
			t.Errorf("%s: %d Pods created, want %d", c.name, got, c.pods)
		}
		if c.pods == 0 && steps(plan, "Sandbox", ActionAnnotate) != 0 {
			t.Errorf("%s: the plan names a Pod it did not create", c.name)
		}
		if !strings.Contains(plan.Problem, c.problem) || (c.problem == "") != (plan.Problem == "") {
			t.Errorf("%s: problem %q, want %q", c.name, plan.Problem, c.problem)
		}
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: sb.Namespace, UID: "pod-uid",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}}}
	plan, err := PlanSandbox(SandboxPlanInputs{Sandbox: sb, Pod: running, Pods: []*corev1.Pod{running}, TemplatePolicy: TemplatePolicyForeign, Now: metav1.Now()})
	if err != nil || plan.Problem != "" || steps(plan, "Pod", ActionDelete) != 0 {
		t.Errorf("a running Pod with a foreign template policy: %v, problem %q, %d deletes", err, plan.Problem, steps(plan, "Pod", ActionDelete))
	}
}
