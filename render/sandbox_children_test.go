package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// childrenSandbox is a Sandbox not created yet, with a Service and two
// volume claim templates.
func childrenSandbox() *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{}
	sb.Name, sb.Namespace = "box", "ns"
	sb.Spec.Service = ptr.To(true)
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	sb.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{
		{EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "work"}},
		{EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "cache"}},
	}
	return sb
}

// listed is "Kind/name" of each check, in order.
func listed(checks []Check) string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Kind+"/"+c.Name)
	}
	return strings.Join(out, " ")
}

func TestSandboxObjects(t *testing.T) {
	sb := childrenSandbox()
	before := sb.DeepCopy()
	children, err := SandboxObjects(sb, Defaults{RuntimeClassName: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listed(children), "Pod/box Service/box PersistentVolumeClaim/work-box PersistentVolumeClaim/cache-box"; got != want {
		t.Errorf("children %s, want %s", got, want)
	}
	if !equality.Semantic.DeepEqual(before, sb) {
		t.Error("the Sandbox was changed")
	}
	pod := children[0].Object.(*corev1ac.PodApplyConfiguration)
	if uid := pod.OwnerReferences[0].UID; uid == nil || *uid != PlaceholderUID {
		t.Errorf("owner UID %v, want the placeholder", uid)
	}
	if got := ptr.Deref(pod.Spec.RuntimeClassName, ""); got != "gvisor" {
		t.Errorf("runtime class %q, want the default gvisor", got)
	}
	for _, c := range children {
		if gvk, ok := c.GVK(); !ok || gvk.Kind != c.Kind || gvk.Version != "v1" || gvk.Group != "" {
			t.Errorf("%s: GVK %v, %v", c.Kind, gvk, ok)
		}
	}
	// A Sandbox with a UID keeps it.
	sb.UID = "5f0d7c2e"
	children, _ = SandboxObjects(sb, Defaults{})
	if uid := children[0].Object.(*corev1ac.PodApplyConfiguration).OwnerReferences[0].UID; *uid != "5f0d7c2e" {
		t.Errorf("owner UID %s, want the Sandbox's", *uid)
	}
	// What cannot be rendered is an error.
	sb.Name = strings.Repeat("a", 64)
	if _, err := SandboxObjects(sb, Defaults{}); err == nil {
		t.Error("a Sandbox whose Service cannot be named rendered")
	}
}

// The plans' checks are SandboxObjects' children: all of them for a new
// Sandbox, the new ones for a reconcile.
func TestSandboxChecksList(t *testing.T) {
	sb := childrenSandbox()
	checks, err := NewSandboxChecks(sb, Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listed(checks), "Sandbox/box Pod/box Service/box PersistentVolumeClaim/work-box PersistentVolumeClaim/cache-box"; got != want {
		t.Errorf("new Sandbox checks %s, want %s", got, want)
	}
	if checks[0].Object != sb {
		t.Error("the Sandbox check is not the Sandbox")
	}
	sb.UID = "u"
	desired, err := Sandbox(SandboxInputs{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	live := &corev1.Pod{}
	live.Name = "box"
	checks = SandboxChecks(sb, desired, NewChildren{Service: true, PVCs: map[string]bool{"cache-box": true}, Adopt: live})
	if got, want := listed(checks), "Sandbox/box Service/box PersistentVolumeClaim/cache-box Pod/box"; got != want {
		t.Errorf("reconcile checks %s, want %s", got, want)
	}
	if last := checks[len(checks)-1]; !last.Adopt || last.Reason != "Pod to adopt, as adoption leaves it" {
		t.Errorf("last check %+v, want the Pod to adopt", last)
	}
	if _, ok := (Check{Kind: "ConfigMap"}).GVK(); ok {
		t.Error("GVK of a kind no plan judges")
	}
}
