package render

import (
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
