package webhooks

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/agentsandbox/reconciler/render"
)

// guardWarmMembers refuses an update, from anyone but the controller, that
// changes what a claim would take of an unclaimed warm member (a Sandbox
// its SandboxWarmPool controls): its spec, or its labels and annotations
// reserved for the controller (the agents.x-k8s.io and
// extensions.agents.x-k8s.io keys: the template it was made from, which
// its Pod's NetworkPolicy follows, its pool's marks). A member is its
// pool's until a claim takes it, and the next claim may be anyone's in the
// namespace: a user who may update Sandboxes could otherwise hand that
// claim a member running what they put in it. Deleting a member (the pool
// makes another) and removing its pool's reference (no claim takes it
// then; checkOwnership judges references) stay anyone's, as do the other
// labels and annotations, and an update that changes none of these (a
// GitOps tool applying the member as it is).
func (v *Validator) guardWarmMembers(req admission.Request) *admission.Response {
	if req.Kind.Kind != "Sandbox" || req.Operation != admissionv1.Update {
		return nil
	}
	if v.ControllerUser != "" && req.UserInfo.Username == v.ControllerUser {
		return nil
	}
	was, err := guardedController(req.OldObject.Raw)
	if err != nil || was == nil || was.Kind != "SandboxWarmPool" {
		return nil
	}
	is, err := guardedController(req.Object.Raw)
	if err != nil || is == nil || !sameOwner(*was, *is) {
		return nil
	}
	var changed []string
	if !sameSpec(req.Object.Raw, req.OldObject.Raw) {
		changed = append(changed, "spec")
	}
	changed = append(changed, changedReservedKeys(req.OldObject.Raw, req.Object.Raw)...)
	if len(changed) == 0 {
		return nil
	}
	resp := admission.Denied(fmt.Sprintf("Sandbox %s is an unclaimed member of SandboxWarmPool %s: only the agent-sandbox controller (%s) may change its %v, and this request comes from %q; a claim takes it as its pool made it (change the pool's SandboxTemplate instead, or delete the member and the pool makes another)",
		req.Name, was.Name, controllerUserOrNone(v.ControllerUser), changed, req.UserInfo.Username))
	resp.Result.Code = http.StatusForbidden
	resp.Result.Reason = metav1.StatusReasonForbidden
	return &resp
}

// changedReservedKeys lists the labels and annotations reserved for the
// controller (render.IsReservedKey) that differ between two versions of an
// object, each as "label <key>" or "annotation <key>", sorted. An object
// whose metadata cannot be read counts as changing them all.
func changedReservedKeys(oldRaw, newRaw []byte) []string {
	var a, b struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if json.Unmarshal(oldRaw, &a) != nil || json.Unmarshal(newRaw, &b) != nil {
		return []string{"metadata (unreadable)"}
	}
	var out []string
	diff := func(what string, x, y map[string]string) {
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			xv, xok := x[k]
			yv, yok := y[k]
			if render.IsReservedKey(k) && (xok != yok || xv != yv) {
				out = append(out, what+" "+k)
			}
		}
	}
	diff("label", a.Metadata.Labels, b.Metadata.Labels)
	diff("annotation", a.Metadata.Annotations, b.Metadata.Annotations)
	return out
}
