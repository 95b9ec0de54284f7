package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// ValidatePath is where the API server sends admission reviews for our kinds.
const ValidatePath = "/validate-agent-sandbox"

// Validator admits Sandboxes, SandboxTemplates, SandboxClaims and
// SandboxWarmPools: it checks the object with the policies and renders what
// the controller would make of it (the Pod above all) and checks that too,
// so a Sandbox that would become a privileged or non-gVisor Pod is refused
// at kubectl apply time with the Pod-level message. It never mutates.
type Validator struct {
	Policy *policy.Holder
	// Reader resolves a claim's pool and a pool's template; nil skips that.
	Reader client.Reader
	// ControllerNamespace is where the sandbox router runs.
	ControllerNamespace string
	// Defaults are the controller's defaults for template-made Sandboxes.
	Defaults render.Defaults
}

var _ admission.Handler = (*Validator)(nil)

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if resp := refuseClaimMetadata(req); resp != nil {
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
	if err != nil {
		// Not ours to judge: the API server validates the schema itself.
		return admission.Allowed("not rendered: " + err.Error())
	}
	var decisions []policy.Decision
	for _, o := range objs {
		ds, err := set.CheckAs(ctx, o.gvk, o.obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		decisions = append(decisions, ds...)
	}
	var warnings []string
	var denials []string
	for _, d := range decisions {
		switch d.Action {
		case policy.Deny:
			denials = append(denials, fmt.Sprintf("%s: %s (policy %s)", d.Object, d.Message, d.Policy))
		case policy.Warn:
			warnings = append(warnings, fmt.Sprintf("%s: %s (policy %s)", d.Object, d.Message, d.Policy))
		}
	}
	if len(denials) > 0 {
		resp := admission.Denied(strings.Join(denials, "; "))
		resp.Result.Code = http.StatusForbidden
		resp.Result.Reason = metav1.StatusReasonForbidden
		return resp.WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
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

type checked struct {
	gvk schema.GroupVersionKind
	obj any
}

// rendered decodes the object under review and renders what it stands for.
func (v *Validator) rendered(ctx context.Context, req admission.Request) ([]checked, error) {
	kind := req.Kind.Kind
	switch kind {
	case "Sandbox":
		sb := &sandboxv1beta1.Sandbox{}
		if err := json.Unmarshal(req.Object.Raw, sb); err != nil {
			return nil, err
		}
		return sandboxObjects(sb, req)
	case "SandboxTemplate":
		t := &extv1beta1.SandboxTemplate{}
		if err := json.Unmarshal(req.Object.Raw, t); err != nil {
			return nil, err
		}
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), t}}
		member := templateSandbox(t, v.Defaults)
		more, err := sandboxObjects(member, req)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
		probe := t.DeepCopy()
		if probe.UID == "" {
			probe.UID = placeholderUID
		}
		if d, err := render.Template(render.TemplateInputs{Template: probe, ControllerNamespace: v.ControllerNamespace}); err == nil && d.NetworkPolicy != nil {
			out = append(out, checked{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), d.NetworkPolicy})
		}
		return out, nil
	case "SandboxWarmPool":
		p := &extv1beta1.SandboxWarmPool{}
		if err := json.Unmarshal(req.Object.Raw, p); err != nil {
			return nil, err
		}
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), p}}
		if t := v.template(ctx, p.Namespace, p.Spec.TemplateRef.Name); t != nil {
			more, err := sandboxObjects(templateSandbox(t, v.Defaults), req)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	case "SandboxClaim":
		c := &extv1beta1.SandboxClaim{}
		if err := json.Unmarshal(req.Object.Raw, c); err != nil {
			return nil, err
		}
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), c}}
		if !render.NeedsColdStart(c) || v.Reader == nil {
			return out, nil
		}
		pool := &extv1beta1.SandboxWarmPool{}
		if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.WarmPoolRef.Name}, pool); err != nil {
			return out, nil
		}
		t := v.template(ctx, c.Namespace, pool.Spec.TemplateRef.Name)
		if t == nil {
			return out, nil
		}
		probe := c.DeepCopy()
		if probe.UID == "" {
			probe.UID = placeholderUID
		}
		ac, err := render.ClaimSandbox(render.ClaimInputs{Claim: probe, Template: t, Defaults: v.Defaults})
		if err != nil {
			// Injection refusals are reported on the claim by the controller.
			return out, nil
		}
		sb := &sandboxv1beta1.Sandbox{}
		if b, err := json.Marshal(ac); err == nil {
			_ = json.Unmarshal(b, sb)
		}
		more, err := sandboxObjects(sb, req)
		if err != nil {
			return nil, err
		}
		return append(out, more...), nil
	}
	return nil, fmt.Errorf("kind %s is not validated here", kind)
}

const placeholderUID = types.UID("00000000-0000-0000-0000-000000000000")

func (v *Validator) template(ctx context.Context, ns, name string) *extv1beta1.SandboxTemplate {
	if v.Reader == nil {
		return nil
	}
	t := &extv1beta1.SandboxTemplate{}
	if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, t); err != nil {
		// Missing (or unreadable): the object itself was checked; the
		// controller checks again before it creates anything.
		return nil
	}
	return t
}

// templateSandbox is the Sandbox a template stands for (as a pool member).
func templateSandbox(t *extv1beta1.SandboxTemplate, d render.Defaults) *sandboxv1beta1.Sandbox {
	name := t.Name
	if name == "" {
		name = "template"
	}
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: render.NameHash(t.Name)}},
		Spec: render.TemplateSpec(t, d),
	}
}

// sandboxObjects is a Sandbox and what it renders to (Pod, Service, PVCs),
// the way the controller would create them.
func sandboxObjects(sb *sandboxv1beta1.Sandbox, req admission.Request) ([]checked, error) {
	probe := sb.DeepCopy()
	if probe.Namespace == "" {
		probe.Namespace = req.Namespace
	}
	if probe.Name == "" {
		probe.Name = req.Name
	}
	if probe.Name == "" && probe.GenerateName != "" {
		probe.Name = probe.GenerateName + "x"
	}
	if probe.UID == "" {
		probe.UID = placeholderUID
	}
	out := []checked{{sandboxv1beta1.GroupVersion.WithKind("Sandbox"), sb}}
	if req.Kind.Kind != "Sandbox" {
		// A template-made Sandbox is checked through its Pod; the Sandbox
		// object itself is the controller's.
		out = nil
	}
	desired, err := render.Sandbox(render.SandboxInputs{Sandbox: probe})
	if err != nil {
		return nil, err
	}
	if desired.Pod != nil {
		out = append(out, checked{corev1.SchemeGroupVersion.WithKind("Pod"), desired.Pod})
	}
	if desired.Service != nil {
		out = append(out, checked{corev1.SchemeGroupVersion.WithKind("Service"), desired.Service})
	}
	for _, p := range desired.PVCs {
		out = append(out, checked{corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), p})
	}
	return out, nil
}
