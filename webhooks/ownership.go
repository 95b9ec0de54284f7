package webhooks

import (
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// DefaultControllerServiceAccount is the controller's ServiceAccount in
// the deploy bundle (config/rbac/service_account.yaml).
const DefaultControllerServiceAccount = "agent-sandbox-controller"

// ServiceAccountUser is the username the API server gives requests made
// with a ServiceAccount's token.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// guardedOwners are the kinds whose controller reference only the
// controller may set, under any API group: a Sandbox controlled by a pool is a warm member
// (claims take it, the pool deletes it) and one controlled by a claim is
// that claim's; a forged reference would hand a user's object to the
// controller's bookkeeping, or someone else's Sandbox to a claim.
var guardedOwners = map[string]bool{"SandboxWarmPool": true, "SandboxClaim": true}

// ownedKinds are the kinds under review whose controller reference is
// guarded.
var ownedKinds = map[string]bool{"Sandbox": true, "SandboxClaim": true}

// checkOwnership refuses a request that gives a Sandbox or SandboxClaim a
// controller reference to a SandboxWarmPool or SandboxClaim, unless it
// comes from the controller itself. An update that keeps the reference
// the object already had is anyone's (GitOps tools apply whole objects).
// It returns nil when the request may go on to the policy checks.
func (v *Validator) checkOwnership(req admission.Request) *admission.Response {
	if !ownedKinds[req.Kind.Kind] || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return nil
	}
	ref, err := guardedController(req.Object.Raw)
	if err != nil {
		// Fail closed: an object whose owners cannot be read is not admitted.
		resp := admission.Errored(http.StatusBadRequest, fmt.Errorf("reading the owner references of %s %s: %w", req.Kind.Kind, req.Name, err))
		return &resp
	}
	if ref == nil {
		return nil
	}
	if req.Operation == admissionv1.Update {
		if old, err := guardedController(req.OldObject.Raw); err == nil && old != nil && sameOwner(*old, *ref) {
			return nil
		}
	}
	if v.ControllerUser != "" && req.UserInfo.Username == v.ControllerUser {
		return nil
	}
	name := req.Name
	if name == "" {
		name = "(generated name)"
	}
	resp := admission.Denied(fmt.Sprintf("%s %s may not be given a controller ownerReference to %s %s (%s): only the agent-sandbox controller (%s) sets it, and this request comes from %q; remove the ownerReference (a SandboxClaim is how a warm pool's Sandbox is taken)",
		req.Kind.Kind, name, ref.Kind, ref.Name, ref.APIVersion, controllerUserOrNone(v.ControllerUser), req.UserInfo.Username))
	resp.Result.Code = http.StatusForbidden
	resp.Result.Reason = metav1.StatusReasonForbidden
	return &resp
}

func controllerUserOrNone(u string) string {
	if u == "" {
		return "not configured"
	}
	return u
}

// guardedController returns the object's controller reference if it
// names a guarded kind, whatever its API group, else nil. The group is not
// a reason to let a reference through: a SandboxWarmPool of another group
// carrying our pool's UID is how a forged member would be made, and no
// real owner of another group has these kinds' names.
func guardedController(raw []byte) (*metav1.OwnerReference, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	ref := metav1.GetControllerOfNoCopy(&obj.Metadata)
	if ref == nil || !guardedOwners[ref.Kind] {
		return nil, nil
	}
	return ref, nil
}

// sameOwner compares two controller references by what identifies the
// owner (the version may differ between v1alpha1 and v1beta1 clients).
func sameOwner(a, b metav1.OwnerReference) bool {
	ga, _ := schema.ParseGroupVersion(a.APIVersion)
	gb, _ := schema.ParseGroupVersion(b.APIVersion)
	return ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID
}
