package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// EventWarmMemberPolicyDenied is the Warning event on a claim that passed
// over a warm member whose running Pod the policies deny.
const EventWarmMemberPolicyDenied = sandboxv1beta1.EventWarmMemberPolicyDenied

// memberPodDenied judges the running Pod of warm member m as claim c would
// have it (render.ClaimedMemberPod) by the policies in force in the
// claim's namespace, and returns their denial ("" when they allow it, or
// when no policy is loaded). The member's spec is judged by the claim's
// plan; this is what actually runs, which differs where the Pod was made
// before a policy was enforced (under another default runtime class, say)
// or was changed since. A member without a Pod of its own (not Ready: not
// offered) is not judged here.
func (r *ClaimReconciler) memberPodDenied(ctx context.Context, c *extv1beta1.SandboxClaim, m *sandboxv1beta1.Sandbox) (string, error) {
	set := r.Policy.Get()
	if set == nil {
		return "", nil
	}
	pods, _, err := podsControlledBy(ctx, r.Client, m)
	if err != nil {
		return "", fmt.Errorf("listing the Pod of member %s: %w", m.Name, err)
	}
	inNS, _ := r.Policy.In(ctx, c.Namespace)
	for _, pod := range pods {
		if !sandboxv1beta1.IsControlledBy(pod, m, sandboxv1beta1.SandboxKind) {
			continue
		}
		check := render.Check{Kind: "Pod", Name: pod.Name, Reason: "the warm member's running Pod, as the claim takes it",
			Object: render.ClaimedMemberPod(c, pod)}
		if _, err := checkPlanned(inNS, set, []render.Check{check}); err != nil {
			var denied *policyError
			if errors.As(err, &denied) {
				return denied.Error(), nil
			}
			return "", err
		}
	}
	return "", nil
}

// passOver deals with a warm member whose running Pod is denied: it is not
// handed out (the queue gave it up already), a Warning event on the claim
// says why, and the member is deleted, guarded by the UID and
// resourceVersion it was judged on (a member changed or taken meanwhile
// fails the delete and is left alone), so its pool makes a compliant one
// in its place.
func (r *ClaimReconciler) passOver(ctx context.Context, c *extv1beta1.SandboxClaim, m *sandboxv1beta1.Sandbox, denial string) {
	r.Recorder.Eventf(c, m, corev1.EventTypeWarning, EventWarmMemberPolicyDenied, "Adopt",
		"warm Sandbox %s was not taken: its running Pod is denied (%s); it is deleted for its pool to replace", m.Name, denial)
	if _, err := r.Engine.DeleteIfUnchanged(ctx, "Sandbox", m); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.FromContext(ctx).Error(err, "deleting a warm member whose Pod is denied", "sandbox", m.Name)
	}
}
