package render

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// Adopted is the Sandbox a warm member becomes once claim c takes it, as the
// Adoption apply leaves it (the pool's labels and reference are ours alone,
// so the apply removes them): controlled by the claim, out of the pool, with
// the claim's identity labels, the resume annotations of the template t (nil
// when it is gone) and of the claim, and the claim's additional Pod metadata
// in the pod template. It is what the policies judge before the adoption is
// written. member is not changed.
func Adopted(c *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate, member *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox {
	sb := member.DeepCopy()
	sb.OwnerReferences = adoptedOwners(c, sb.OwnerReferences)
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	for k, v := range adoptedLabels(c) {
		if v == "" {
			delete(sb.Labels, k)
		} else {
			sb.Labels[k] = v
		}
	}
	podName := PodName(member)
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[sandboxv1beta1.AnnotationPodName] = podName
	maps.Copy(sb.Annotations, adoptedResumeAnnotations(c, t))
	extra := c.Spec.AdditionalPodMetadata
	meta := &sb.Spec.PodTemplate.ObjectMeta
	if len(extra.Labels) > 0 {
		if meta.Labels == nil {
			meta.Labels = map[string]string{}
		}
		maps.Copy(meta.Labels, extra.Labels)
	}
	if len(extra.Annotations) > 0 {
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		maps.Copy(meta.Annotations, extra.Annotations)
	}
	return sb
}

// adoptedOwners are refs with the controller reference, if any, replaced by
// one to the claim c.
func adoptedOwners(c *extv1beta1.SandboxClaim, refs []metav1.OwnerReference) []metav1.OwnerReference {
	owners := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, ref := range refs {
		if ref.Controller == nil || !*ref.Controller {
			owners = append(owners, ref)
		}
	}
	return append(owners, *metav1.NewControllerRef(c, extv1beta1.GroupVersion.WithKind("SandboxClaim")))
}

// Adoption renders the server-side apply that hands a warm member to a
// claim, applied as manager (our field manager): what manager owns of the
// member already (its Apply entry: the member as the pool created it),
// with the member's resourceVersion as a precondition (so two claims, or
// two controllers, can never both take it), the claim as its controller
// in place of the pool, the pool's labels left out (an apply removes what
// its manager owned and no longer sets), the claim's identity labels, the
// resume annotations of the template t (nil when it is gone) and of the
// claim (a pool never gives them to its members: an unclaimed member is
// never suspended for being idle), and the claim's additional Pod
// metadata in the pod template. The pod-name annotation is set only when
// the member lacks it or manager holds it already: otherwise its value is
// the one the adoption would set, and it stays with the manager that
// keeps it (so that a later removal, when suspended, is that manager's
// alone). Nothing else of the member changes.
func Adoption(c *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate, member *sandboxv1beta1.Sandbox, manager string) (*sandboxac.SandboxApplyConfiguration, error) {
	if member.ResourceVersion == "" {
		return nil, fmt.Errorf("render: adopting %s: no resourceVersion to guard the change with", member.Name)
	}
	ac, err := sandboxac.ExtractSandbox(member, manager)
	if err != nil {
		return nil, fmt.Errorf("render: adopting %s: reading what %s owns of it: %w", member.Name, manager, err)
	}
	// Both guard the apply: the resourceVersion fails it when the member
	// changed since it was judged; the UID when it is gone, since an apply
	// carrying only a resourceVersion would create a Sandbox of that name
	// anew (the API server honours resourceVersion on updates alone).
	ac.WithResourceVersion(member.ResourceVersion).WithUID(member.UID)
	owners := ac.OwnerReferences
	ac.OwnerReferences = nil
	for _, ref := range owners {
		if ref.Controller == nil || !*ref.Controller {
			ac.WithOwnerReferences(&ref)
		}
	}
	ac.WithOwnerReferences(controllerRef(c, extv1beta1.GroupVersion.WithKind("SandboxClaim")))
	for k, v := range adoptedLabels(c) {
		if v == "" {
			delete(ac.Labels, k) // removed: ours to give up
		} else {
			ac.WithLabels(map[string]string{k: v})
		}
	}
	annotations := maps.Clone(adoptedResumeAnnotations(c, t))
	if annotations == nil {
		annotations = map[string]string{}
	}
	if _, held := ac.Annotations[sandboxv1beta1.AnnotationPodName]; held || member.Annotations[sandboxv1beta1.AnnotationPodName] == "" {
		// As upstream, in the same change as the ownership transfer:
		// the Pod the adopted Sandbox keeps.
		annotations[sandboxv1beta1.AnnotationPodName] = PodName(member)
	}
	if len(annotations) > 0 {
		ac.WithAnnotations(annotations)
	}
	extra := c.Spec.AdditionalPodMetadata
	if len(extra.Labels) > 0 || len(extra.Annotations) > 0 {
		if ac.Spec == nil {
			ac.WithSpec(sandboxac.SandboxSpec())
		}
		if ac.Spec.PodTemplate == nil {
			ac.Spec.WithPodTemplate(sandboxac.PodTemplate())
		}
		if ac.Spec.PodTemplate.ObjectMeta == nil {
			ac.Spec.PodTemplate.WithObjectMeta(sandboxac.PodMetadata())
		}
		meta := ac.Spec.PodTemplate.ObjectMeta
		if len(extra.Labels) > 0 {
			meta.WithLabels(extra.Labels)
		}
		if len(extra.Annotations) > 0 {
			meta.WithAnnotations(extra.Annotations)
		}
	}
	return ac, nil
}

// labelPodTemplateHash is upstream's pool member label (its hash of the pod
// template); a Sandbox loses it, like the pool labels, when a claim takes it.
const labelPodTemplateHash = sandboxv1beta1.GroupName + "/sandbox-pod-template-hash"

// adoptedLabels are the label changes of a member a claim takes, as
// upstream makes them: the pool's labels go (an empty value removes), the
// claim's identity and launch type come, and created-by is the claim's or
// none.
func adoptedLabels(c *extv1beta1.SandboxClaim) map[string]string {
	return map[string]string{
		sandboxv1beta1.LabelWarmPoolSandbox:     "",
		sandboxv1beta1.LabelSandboxTemplateHash: "",
		labelPodTemplateHash:                    "",
		sandboxv1beta1.LabelClaimUID:            string(c.UID),
		sandboxv1beta1.LabelLaunchType:          sandboxv1beta1.LaunchTypeWarm,
		sandboxv1beta1.LabelCreatedBy:           c.Labels[sandboxv1beta1.LabelCreatedBy],
	}
}

// adoptedResumeAnnotations are the resume annotations a member takes from
// the template (nil: gone) and the claim that adopts it.
func adoptedResumeAnnotations(c *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate) map[string]string {
	var fromTemplate map[string]string
	if t != nil {
		fromTemplate = t.Annotations
	}
	return sandboxv1beta1.ResumeAnnotations(fromTemplate, c.Annotations)
}

// ClaimedMemberPod is the running Pod of a warm member as it will be once
// claim c takes the member: the Pod as it is (its spec is what runs, which
// may differ from what the member's spec renders now: a Pod made before a
// policy was enforced, under another default, or changed by admission
// since), with the claim's additional labels and annotations added.
// pod is not changed.
func ClaimedMemberPod(c *extv1beta1.SandboxClaim, pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	extra := c.Spec.AdditionalPodMetadata
	if len(extra.Labels) > 0 && p.Labels == nil {
		p.Labels = map[string]string{}
	}
	maps.Copy(p.Labels, extra.Labels)
	if len(extra.Annotations) > 0 && p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	maps.Copy(p.Annotations, extra.Annotations)
	return p
}
