package render

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Adopted is the Sandbox a warm member becomes once claim c takes it, as the
// Adoption patch leaves it: controlled by the claim, out of the pool, with
// the claim's identity labels and its additional Pod metadata in the pod
// template. It is what the policies judge before the adoption is written.
// member is not changed.
func Adopted(c *extv1beta1.SandboxClaim, member *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox {
	sb := member.DeepCopy()
	owners := make([]metav1.OwnerReference, 0, len(sb.OwnerReferences)+1)
	for _, ref := range sb.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			owners = append(owners, ref)
		}
	}
	yes := true
	sb.OwnerReferences = append(owners, metav1.OwnerReference{
		APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: c.Name, UID: c.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	})
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
