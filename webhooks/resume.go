package webhooks

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// refuseResumeAnnotations denies a Sandbox, SandboxTemplate or SandboxClaim
// whose resume annotations (agents.x-k8s.io/resume-on-connect,
// agents.x-k8s.io/idle-timeout) do not parse, with the parse error, so a
// typo fails kubectl apply instead of silently leaving a Sandbox running
// forever. It holds with or without policies. An update that leaves those
// annotations as they were is not judged again (an object admitted before
// this check can still be changed otherwise), and neither are the
// controller's own requests: it copies what a template and a claim carry.
// Nil means not refused here.
func (v *Validator) refuseResumeAnnotations(req admission.Request) *admission.Response {
	switch req.Kind.Kind {
	case "Sandbox", "SandboxTemplate", "SandboxClaim":
	default:
		return nil
	}
	if v.ControllerUser != "" && req.UserInfo.Username == v.ControllerUser {
		return nil
	}
	// Metadata has the same shape in every version.
	annotations, ok := resumeAnnotations(req.Object.Raw)
	if !ok {
		return nil // reported by the rest of the review
	}
	if req.Operation == admissionv1.Update {
		if old, ok := resumeAnnotations(req.OldObject.Raw); ok && maps.Equal(old, annotations) {
			return nil
		}
	}
	if _, err := sandboxv1beta1.ResumePolicyOf(annotations); err != nil {
		resp := admission.Denied(fmt.Sprintf("%s %s: %v", req.Kind.Kind, req.Name, err))
		resp.Result.Code = http.StatusForbidden
		resp.Result.Reason = metav1.StatusReasonForbidden
		return &resp
	}
	return nil
}

// resumeAnnotations reads the resume annotations of an object's JSON.
func resumeAnnotations(raw []byte) (map[string]string, bool) {
	var o metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, false
	}
	return sandboxv1beta1.ResumeAnnotations(nil, o.Annotations), true
}
