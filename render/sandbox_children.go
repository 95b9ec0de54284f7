package render

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

var errNoSandbox = errors.New("render: plan needs a sandbox")

// Adoptable reports whether an object without a controller may be taken
// over by sb: it is labeled adoptable, or carries sb's name-hash label.
func Adoptable(o metav1.Object, sb *sandboxv1beta1.Sandbox) bool {
	if metav1.GetControllerOfNoCopy(o) != nil {
		return false
	}
	l := o.GetLabels()
	return l[sandboxv1beta1.LabelAdoptable] == sandboxv1beta1.AdoptableValue ||
		l[sandboxv1beta1.LabelSandboxNameHash] == NameHash(sb.Name)
}

// notTaken is upstream's error for a child object in the way: owned by
// another controller, or unowned without a label that allows adoption.
func notTaken(kind string, o metav1.Object, sb *sandboxv1beta1.Sandbox) string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return fmt.Sprintf("%s %q is owned by %s/%s (UID: %s), not by sandbox %q", kind, o.GetName(), ref.Kind, ref.Name, ref.UID, sb.Name)
	}
	return fmt.Sprintf("cannot adopt unowned %s %q: missing required pool authorization label (%q) or sandbox tracking label (%q)",
		kind, o.GetName(), sandboxv1beta1.LabelAdoptable, sandboxv1beta1.LabelSandboxNameHash)
}

// clusterIPInTheWay is the problem of an adoptable Service that is not
// headless: its ClusterIP cannot be changed.
func clusterIPInTheWay(svc *corev1.Service) string {
	return fmt.Sprintf("cannot adopt service %q: ClusterIP is %q (expected %q, field is immutable)",
		svc.Name, svc.Spec.ClusterIP, corev1.ClusterIPNone)
}

// NewChildren says which of a Sandbox's rendered children are about to be
// created or adopted: the ones policies judge (what exists was admitted
// before).
type NewChildren struct {
	Pod, Service bool
	// PVCs are the PVCs to create, by name.
	PVCs map[string]bool
	// Adopt is an existing Pod the Sandbox is about to take over. It was
	// admitted as somebody else's Pod, so it is judged as if it were
	// created now as the Sandbox's (see AdoptedPod).
	Adopt *corev1.Pod
}

// SandboxChecks lists what the policies judge before a Sandbox's children
// are written, in this order: the Sandbox, the new Pod, the new Service,
// the new PVCs, and the Pod about to be adopted as adoption will leave it.
func SandboxChecks(sb *sandboxv1beta1.Sandbox, desired SandboxDesired, c NewChildren) []Check {
	checks := []Check{{Kind: "Sandbox", Name: sb.Name, Reason: "the Sandbox", Object: sb}}
	if c.Pod && desired.Pod != nil {
		checks = append(checks, Check{Kind: "Pod", Name: *desired.Pod.Name, Reason: "new Pod", Object: desired.Pod})
	}
	if c.Service && desired.Service != nil {
		checks = append(checks, Check{Kind: "Service", Name: *desired.Service.Name, Reason: "new Service", Object: desired.Service})
	}
	for _, p := range desired.PVCs {
		if c.PVCs[*p.Name] {
			checks = append(checks, Check{Kind: "PersistentVolumeClaim", Name: *p.Name, Reason: "new PVC", Object: p})
		}
	}
	if c.Adopt != nil {
		checks = append(checks, Check{Kind: "Pod", Name: c.Adopt.Name, Reason: "Pod to adopt, as adoption leaves it", Adopt: true,
			Object: AdoptedPod(c.Adopt, desired.Pod)})
	}
	return checks
}

// NewSandboxChecks lists what the policies judge before the controller
// creates sb (a pool member, a claim's Sandbox): sb, then every child it
// will create, rendered with the defaults in force. A Sandbox that cannot
// be rendered is an error: nothing is to be created from it, and only a
// change to what it is made from helps.
func NewSandboxChecks(sb *sandboxv1beta1.Sandbox, d Defaults) ([]Check, error) {
	probe := sb.DeepCopy()
	if probe.UID == "" {
		probe.UID = types.UID("not-created-yet")
	}
	desired, err := Sandbox(SandboxInputs{Sandbox: probe, Defaults: d})
	if err != nil {
		return nil, fmt.Errorf("rendering for the policy check: %w", err)
	}
	c := NewChildren{Pod: true, Service: true, PVCs: map[string]bool{}}
	for _, p := range desired.PVCs {
		c.PVCs[*p.Name] = true
	}
	return SandboxChecks(sb, desired, c), nil
}

// AdoptedPod is live as it will be once the Sandbox adopts it: its spec
// unchanged, with the rendered Pod's labels, annotations and owner
// references added. live is not changed.
func AdoptedPod(live *corev1.Pod, desired *corev1ac.PodApplyConfiguration) *corev1.Pod {
	p := live.DeepCopy()
	if desired == nil || desired.ObjectMetaApplyConfiguration == nil {
		return p
	}
	if desired.Labels != nil && p.Labels == nil {
		p.Labels = map[string]string{}
	}
	maps.Copy(p.Labels, desired.Labels)
	if desired.Annotations != nil && p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	maps.Copy(p.Annotations, desired.Annotations)
	for _, ref := range desired.OwnerReferences {
		if ref.APIVersion == nil || ref.Kind == nil || ref.Name == nil || ref.UID == nil {
			continue
		}
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: *ref.APIVersion, Kind: *ref.Kind, Name: *ref.Name, UID: *ref.UID,
			Controller: ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion,
		})
	}
	return p
}
