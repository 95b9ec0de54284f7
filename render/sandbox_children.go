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
	// NetworkPolicy: the namespace's default-deny NetworkPolicy is to be
	// created.
	NetworkPolicy bool
	// Adopt is an existing Pod the Sandbox is about to take over. It was
	// admitted as somebody else's Pod, so it is judged as if it were
	// created now as the Sandbox's (see AdoptedPod).
	Adopt *corev1.Pod
}

// PlaceholderUID stands in for the UID of a Sandbox not created yet (a
// manifest, an object under admission, a pool member or claim's Sandbox
// about to be created): its children's owner references need one.
const PlaceholderUID = types.UID("00000000-0000-0000-0000-000000000000")

// SandboxObjects renders a Sandbox as the controller creates it, with the
// defaults in force, and lists what it renders to (Children). A Sandbox
// without a UID gets PlaceholderUID; sb is not changed. It is the one
// "render a Sandbox and list its children" of the controller's plans, the
// webhook and the CLI.
func SandboxObjects(sb *sandboxv1beta1.Sandbox, d Defaults) ([]Check, error) {
	probe := sb.DeepCopy()
	if probe.UID == "" {
		probe.UID = PlaceholderUID
	}
	desired, err := Sandbox(SandboxInputs{Sandbox: probe, Defaults: d})
	if err != nil {
		return nil, err
	}
	return desired.Children(), nil
}

// Children lists the objects d holds, in the order the policies judge
// them: the Pod, the Service, then the PVCs in template order, each a
// check of a new child.
func (d SandboxDesired) Children() []Check {
	var out []Check
	if d.Pod != nil {
		out = append(out, Check{Kind: "Pod", Name: *d.Pod.Name, Reason: "new Pod", Object: d.Pod})
	}
	if d.Service != nil {
		out = append(out, Check{Kind: "Service", Name: *d.Service.Name, Reason: "new Service", Object: d.Service})
	}
	for _, p := range d.PVCs {
		out = append(out, Check{Kind: "PersistentVolumeClaim", Name: *p.Name, Reason: "new PVC", Object: p})
	}
	return out
}

// SandboxChecks lists what the policies judge before a Sandbox's children
// are written, in this order: the Sandbox, the new Pod, the new Service,
// the new PVCs, the new NetworkPolicy, and the Pod about to be adopted as
// adoption will leave it.
func SandboxChecks(sb *sandboxv1beta1.Sandbox, desired SandboxDesired, c NewChildren) []Check {
	checks := []Check{sandboxCheck(sb)}
	for _, child := range desired.Children() {
		switch child.Kind {
		case "Pod":
			if !c.Pod {
				continue
			}
		case "Service":
			if !c.Service {
				continue
			}
		default:
			if !c.PVCs[child.Name] {
				continue
			}
		}
		checks = append(checks, child)
	}
	if c.NetworkPolicy && desired.NetworkPolicy != nil {
		checks = append(checks, Check{Kind: "NetworkPolicy", Name: *desired.NetworkPolicy.Name, Reason: "new NetworkPolicy", Object: desired.NetworkPolicy})
	}
	if c.Adopt != nil {
		checks = append(checks, Check{Kind: "Pod", Name: c.Adopt.Name, Reason: "Pod to adopt, as adoption leaves it", Adopt: true,
			Object: AdoptedPod(c.Adopt, desired.Pod)})
	}
	return checks
}

func sandboxCheck(sb *sandboxv1beta1.Sandbox) Check {
	return Check{Kind: "Sandbox", Name: sb.Name, Reason: "the Sandbox", Object: sb}
}

// NewSandboxChecks lists what the policies judge before the controller
// creates sb (a pool member, a claim's Sandbox): sb, then every child it
// will create (SandboxObjects). A Sandbox that cannot be rendered is an
// error: nothing is to be created from it, and only a change to what it
// is made from helps.
func NewSandboxChecks(sb *sandboxv1beta1.Sandbox, d Defaults) ([]Check, error) {
	children, err := SandboxObjects(sb, d)
	if err != nil {
		return nil, fmt.Errorf("rendering for the policy check: %w", err)
	}
	return append([]Check{sandboxCheck(sb)}, children...), nil
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
