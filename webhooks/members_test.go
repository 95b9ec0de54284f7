package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// TestWarmMembersAreTheirPools plays mallory, who may update Sandboxes in
// a namespace she shares with alice, and edits an unclaimed warm member so
// that alice's next claim takes what mallory put in it: another image, a
// suspend and resume to restart its Pod from that, a template ref hash
// label that takes its Pod out from under its template's NetworkPolicy.
// Each is refused, with policies and without. The controller's own
// changes (a claim taking the member, its marks), an update that changes
// none of these, a label of mallory's own, removing the pool's reference
// and changing a Sandbox no pool controls stay allowed.
func TestWarmMembersAreTheirPools(t *testing.T) {
	pool := controllerRef("SandboxWarmPool", "pool", "1")
	claim := controllerRef("SandboxClaim", "alices", "2")
	member := func(edit ...func(*sandboxv1beta1.Sandbox)) *sandboxv1beta1.Sandbox {
		sb := sandbox()
		sb.OwnerReferences = append(sb.OwnerReferences, pool)
		sb.Labels = map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: "9d22159f", "team": "a"}
		sb.Annotations = map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: "tpl"}
		for _, e := range edit {
			e(sb)
		}
		return sb
	}
	image := func(sb *sandboxv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.Containers[0].Image = "mallory/agent" }
	suspend := func(sb *sandboxv1beta1.Sandbox) { sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended }
	relabel := func(sb *sandboxv1beta1.Sandbox) { sb.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash] = "00000000" }
	unlabel := func(sb *sandboxv1beta1.Sandbox) { delete(sb.Labels, sandboxv1beta1.LabelSandboxTemplateRefHash) }
	retemplate := func(sb *sandboxv1beta1.Sandbox) { sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef] = "open" }
	ownLabel := func(sb *sandboxv1beta1.Sandbox) { sb.Labels["mallory"] = "was-here" }
	orphan := func(sb *sandboxv1beta1.Sandbox) { sb.OwnerReferences = nil }
	claimed := func(sb *sandboxv1beta1.Sandbox) { sb.OwnerReferences = append(sb.OwnerReferences[:0], claim) }
	for _, c := range []struct {
		name     string
		obj, old *sandboxv1beta1.Sandbox
		user     string
		allowed  bool
		refusal  string
	}{
		{"another image", member(image), member(), "mallory", false, "[spec]"},
		{"suspended, to restart its Pod", member(suspend), member(), "mallory", false, "[spec]"},
		{"the template ref hash relabelled", member(relabel), member(), "mallory", false, "label " + sandboxv1beta1.LabelSandboxTemplateRefHash},
		{"the template ref hash removed", member(unlabel), member(), "mallory", false, "label " + sandboxv1beta1.LabelSandboxTemplateRefHash},
		{"another template named", member(retemplate), member(), "mallory", false, "annotation " + sandboxv1beta1.AnnotationSandboxTemplateRef},
		{"the controller's changes", member(image, relabel), member(), controllerUser, true, ""},
		{"the controller hands it to a claim", member(claimed, suspend), member(), controllerUser, true, ""},
		{"the member applied as it is", member(), member(), "argocd", true, ""},
		{"a label of her own", member(ownLabel), member(), "mallory", true, ""},
		{"the pool's reference removed", member(orphan, image), member(), "mallory", true, ""},
		{"a claim's Sandbox", member(claimed, image), member(claimed), "alice", true, ""},
	} {
		for _, policies := range []bool{false, true} {
			v := &Validator{Policy: &policy.Holder{}, ControllerUser: controllerUser}
			if policies {
				v = validator(t, policy.DefaultBundles...)
				v.ControllerUser = controllerUser
			}
			req := request(t, admissionv1.Update, "Sandbox", c.obj, c.old)
			req.UserInfo = authenticationv1.UserInfo{Username: c.user}
			resp := v.Handle(context.Background(), req)
			if resp.Allowed != c.allowed {
				t.Errorf("%s (policies %v): allowed=%v, want %v (%s)", c.name, policies, resp.Allowed, c.allowed, resp.Result.Message)
				continue
			}
			if !c.allowed && (resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, "unclaimed member of SandboxWarmPool pool") ||
				!strings.Contains(resp.Result.Message, c.refusal) || !strings.Contains(resp.Result.Message, `"mallory"`)) {
				t.Errorf("%s: refusal %d %q, want 403 naming %q", c.name, resp.Result.Code, resp.Result.Message, c.refusal)
			}
		}
	}
}
