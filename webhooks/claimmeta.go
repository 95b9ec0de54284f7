package webhooks

import (
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// refuseClaimMetadata denies a SandboxClaim whose additionalPodMetadata the
// controller would refuse (render.ValidateClaimMetadata: keys container
// runtimes read, reserved keys, invalid syntax), so kubectl apply fails at
// once instead of the claim sitting at InvalidMetadata. It needs neither the
// pool nor the template, and holds with or without policies. An update that
// leaves the spec as it was is not judged again. Nil means not refused here.
func refuseClaimMetadata(req admission.Request) *admission.Response {
	if req.Kind.Kind != "SandboxClaim" {
		return nil
	}
	if req.Operation == admissionv1.Update && sameSpec(req.Object.Raw, req.OldObject.Raw) {
		return nil
	}
	// additionalPodMetadata has the same shape in v1alpha1 and v1beta1.
	c := &extv1beta1.SandboxClaim{}
	if err := json.Unmarshal(req.Object.Raw, c); err != nil {
		return nil // reported by the rest of the review
	}
	rej := render.ValidateClaimMetadata(c)
	if rej == nil {
		return nil
	}
	resp := admission.Denied(fmt.Sprintf("SandboxClaim %s: %s", req.Name, rej.Message))
	resp.Result.Code = http.StatusForbidden
	resp.Result.Reason = metav1.StatusReasonForbidden
	return &resp
}
