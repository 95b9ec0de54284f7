package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// ValidatePath is where the API server sends admission reviews for our kinds.
const ValidatePath = "/validate-agent-sandbox"

// OptOutLabel on a namespace (value "disabled") exempts it from the
// webhook: break-glass when the controller is down and failurePolicy Fail
// would block every change. Deprecated: policy modes (policy.ModeLabel)
// replace it; kept for one release.
const OptOutLabel = policy.LegacyOptOutLabel

// Validator admits Sandboxes, SandboxTemplates, SandboxClaims and
// SandboxWarmPools: it checks the object with the policies and renders what
// the controller would make of it (the Pod above all, with the controller's
// default runtime class where the template names none) and checks that
// too, so a Sandbox that would become a privileged or non-gVisor Pod is
// refused at kubectl apply time with the Pod-level message. It fails closed: an
// object it cannot decode or render, or whose pool or template it cannot
// read (other than not found: that may be created later, and the
// controller checks again before it creates anything), is refused. Only the
// controller may give a Sandbox or claim a pool or claim as its controller
// (see checkOwnership), only the controller may change an unclaimed warm
// member's spec and reserved metadata (see guardWarmMembers), and resume
// annotations that do not parse are refused (see refuseResumeAnnotations).
// It never mutates.
type Validator struct {
	Policy *policy.Holder
	// Reader resolves a claim's pool and a pool's template; nil skips that.
	Reader client.Reader
	// ControllerNamespace is where the sandbox router runs.
	ControllerNamespace string
	// Defaults are what a rendered Pod gets where its template leaves a
	// field unset: the controller's own source, so the webhook judges the
	// Pod the controller will create. Nil gives none.
	Defaults render.DefaultsSource
	// Observe, when set, is told every decision of an admission (metrics).
	Observe func([]policy.Decision)
	// ControllerUser is the username of the controller's own requests
	// (ServiceAccountUser of its namespace and ServiceAccount). Only it may
	// set a pool or claim as the controller of a Sandbox or claim; empty:
	// nobody may.
	ControllerUser string
}

var _ admission.Handler = (*Validator)(nil)

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if resp := v.refuseResumeAnnotations(req); resp != nil {
		return *resp
	}
	if resp := refuseClaimMetadata(req); resp != nil {
		return *resp
	}
	if resp := v.checkOwnership(req); resp != nil {
		return *resp
	}
	if resp := v.guardWarmMembers(req); resp != nil {
		return *resp
	}
	set := v.Policy.Get()
	if set == nil {
		return admission.Allowed("no policies")
	}
	if req.Operation == admissionv1.Update && sameSpec(req.Object.Raw, req.OldObject.Raw) {
		// Metadata and status changes render the same Pods: what was
		// admitted stays admitted (and the controller's own label and
		// ownership changes are never blocked).
		return admission.Allowed("spec unchanged")
	}
	objs, err := v.rendered(ctx, req)
	var unreadable *lookupError
	switch {
	case errors.As(err, &unreadable):
		// The object may be fine; we cannot tell now. Fail closed with a
		// server error, which a client may retry.
		return admission.Errored(http.StatusInternalServerError, err)
	case err != nil:
		// What the controller could not render it cannot run: refuse it
		// now rather than admit something no policy has seen.
		resp := admission.Denied(fmt.Sprintf("%s %s cannot be checked against the policies: %v", req.Kind.Kind, req.Name, err))
		resp.Result.Code = http.StatusForbidden
		resp.Result.Reason = metav1.StatusReasonForbidden
		return resp
	}
	// The bundles act in the modes of the object's namespace; problems
	// with its mode labels are shown to the user.
	ctx, problems := v.Policy.In(ctx, req.Namespace)
	var decisions []policy.Decision
	for _, o := range objs {
		ds, err := set.CheckAs(ctx, o.gvk, o.obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		decisions = append(decisions, ds...)
	}
	if v.Observe != nil {
		v.Observe(decisions)
	}
	warnings := problems
	var denials []string
	audits := map[string]string{}
	for _, d := range decisions {
		line := fmt.Sprintf("%s: %s (policy %s)", d.Object, d.Message, d.Policy)
		switch d.Action {
		case policy.Deny:
			denials = append(denials, line)
		case policy.Warn:
			warnings = append(warnings, line)
		case policy.Audit:
			auditAnnotate(audits, d, line)
		}
	}
	var resp admission.Response
	if len(denials) > 0 {
		resp = admission.Denied(strings.Join(denials, "; "))
		resp.Result.Code = http.StatusForbidden
		resp.Result.Reason = metav1.StatusReasonForbidden
	} else {
		resp = admission.Allowed("")
	}
	if len(audits) > 0 {
		resp.AuditAnnotations = audits
	}
	return resp.WithWarnings(warnings...)
}

// auditAnnotate records an Audit finding as an audit annotation (the API
// server files it as validate.agents.x-k8s.io/<key> in the audit event),
// one key per policy, findings joined.
func auditAnnotate(audits map[string]string, d policy.Decision, line string) {
	key := "audit-" + d.Policy
	if len(key) > 63 { // the name part of a qualified name
		key = strings.TrimRight(key[:63], "-.")
	}
	if prev, ok := audits[key]; ok {
		audits[key] = prev + "; " + line
		return
	}
	audits[key] = line
}

func sameSpec(a, b []byte) bool {
	var x, y struct {
		Spec json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	var sx, sy any
	if json.Unmarshal(x.Spec, &sx) != nil || json.Unmarshal(y.Spec, &sy) != nil {
		return false
	}
	return reflect.DeepEqual(sx, sy)
}
