package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

type checked struct {
	gvk schema.GroupVersionKind
	obj any
}

// lookupError is a pool or template that could not be read for another
// reason than not existing.
type lookupError struct {
	kind, name string
	err        error
}

func (e *lookupError) Error() string {
	return fmt.Sprintf("reading %s %s: %v", e.kind, e.name, e.err)
}

func (e *lookupError) Unwrap() error { return e.err }

// hubObject returns the object under review as v1beta1 JSON: deprecated
// versions are converted as the API server would store them.
func hubObject(req admission.Request) ([]byte, error) {
	gv := schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}
	if gv.Version == "" || gv.Version == "v1beta1" {
		return req.Object.Raw, nil
	}
	hub := sandboxv1beta1.GroupVersion
	if req.Kind.Kind != "Sandbox" {
		hub = extv1beta1.GroupVersion
	}
	conv := conversions[[3]string{req.Kind.Kind, gv.String(), hub.String()}]
	if conv == nil {
		return nil, fmt.Errorf("%s %s is not a version this webhook knows", req.Kind.Kind, gv)
	}
	out, err := conv(req.Object.Raw)
	if err != nil {
		return nil, fmt.Errorf("converting %s from %s: %w", req.Kind.Kind, gv, err)
	}
	return json.Marshal(out)
}

// rendered decodes the object under review and renders what it stands for.
// A pool or claim whose pool or template does not exist (yet) is checked
// alone; any other failure is an error.
func (v *Validator) rendered(ctx context.Context, req admission.Request) ([]checked, error) {
	kind := req.Kind.Kind
	raw, err := hubObject(req)
	if err != nil {
		return nil, err
	}
	defaults := render.CurrentDefaults(v.Defaults)
	decode := func(into any) error {
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return nil
	}
	switch kind {
	case "Sandbox":
		sb := &sandboxv1beta1.Sandbox{}
		if err := decode(sb); err != nil {
			return nil, err
		}
		return sandboxObjects(sb, req, defaults)
	case "SandboxTemplate":
		t := &extv1beta1.SandboxTemplate{}
		if err := decode(t); err != nil {
			return nil, err
		}
		fillTemplate(t, req)
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), t}}
		more, err := templateObjects(t, req, defaults, v.ControllerNamespace)
		if err != nil {
			return nil, err
		}
		return append(out, more...), nil
	case "SandboxWarmPool":
		p := &extv1beta1.SandboxWarmPool{}
		if err := decode(p); err != nil {
			return nil, err
		}
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), p}}
		t, err := v.template(ctx, namespaceOf(p.Namespace, req), p.Spec.TemplateRef.Name)
		if err != nil || t == nil {
			return out, err
		}
		more, err := sandboxObjects(render.TemplateProbe(t), req, defaults)
		if err != nil {
			return nil, fmt.Errorf("SandboxTemplate %s: %w", t.Name, err)
		}
		return append(out, more...), nil
	case "SandboxClaim":
		c := &extv1beta1.SandboxClaim{}
		if err := decode(c); err != nil {
			return nil, err
		}
		out := []checked{{extv1beta1.GroupVersion.WithKind(kind), c}}
		if !render.NeedsColdStart(c) || v.Reader == nil {
			return out, nil
		}
		ns := namespaceOf(c.Namespace, req)
		pool := &extv1beta1.SandboxWarmPool{}
		if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Spec.WarmPoolRef.Name}, pool); apierrors.IsNotFound(err) {
			// The claim reports the missing pool; nothing is made until then.
			return out, nil
		} else if err != nil {
			return nil, &lookupError{kind: "SandboxWarmPool", name: c.Spec.WarmPoolRef.Name, err: err}
		}
		t, err := v.template(ctx, ns, pool.Spec.TemplateRef.Name)
		if err != nil || t == nil {
			return out, err
		}
		probe := c.DeepCopy()
		probe.Namespace = ns
		if probe.Name == "" {
			probe.Name = req.Name
		}
		if probe.UID == "" {
			probe.UID = render.PlaceholderUID
		}
		ac, err := render.ClaimSandbox(render.ClaimInputs{Claim: probe, Template: t})
		var rejected *render.ClaimRejection
		if errors.As(err, &rejected) {
			// The claim is refused by the controller with the public
			// API's reason in its status (envVarsInjectionPolicy and
			// friends): nothing is created from it.
			return out, nil
		} else if err != nil {
			return nil, err
		}
		sb := &sandboxv1beta1.Sandbox{}
		b, err := json.Marshal(ac)
		if err != nil {
			return nil, fmt.Errorf("encoding the claim's Sandbox: %w", err)
		}
		if err := json.Unmarshal(b, sb); err != nil {
			return nil, fmt.Errorf("decoding the claim's Sandbox: %w", err)
		}
		more, err := sandboxObjects(sb, req, defaults)
		if err != nil {
			return nil, err
		}
		return append(out, more...), nil
	}
	return nil, fmt.Errorf("kind %s is not validated here", kind)
}

func namespaceOf(ns string, req admission.Request) string {
	if ns != "" {
		return ns
	}
	return req.Namespace
}

func fillTemplate(t *extv1beta1.SandboxTemplate, req admission.Request) {
	t.Namespace = namespaceOf(t.Namespace, req)
	if t.Name == "" {
		t.Name = req.Name
	}
}

// templateObjects are what a template stands for: the objects of a Sandbox
// made from it (as a pool member or cold claim would be) and its shared
// NetworkPolicy.
func templateObjects(t *extv1beta1.SandboxTemplate, req admission.Request, d render.Defaults, controllerNamespace string) ([]checked, error) {
	out, err := sandboxObjects(render.TemplateProbe(t), req, d)
	if err != nil {
		return nil, err
	}
	probe := t.DeepCopy()
	if probe.UID == "" {
		probe.UID = render.PlaceholderUID
	}
	desired, err := render.Template(render.TemplateInputs{Template: probe, ControllerNamespace: controllerNamespace})
	if err != nil {
		return nil, err
	}
	if desired.NetworkPolicy != nil {
		out = append(out, checked{networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), desired.NetworkPolicy})
	}
	return out, nil
}

// template reads a pool's template: nil without an error when it does not
// exist (it may be created later; the controller checks before it creates
// anything) or when there is no reader.
func (v *Validator) template(ctx context.Context, ns, name string) (*extv1beta1.SandboxTemplate, error) {
	if v.Reader == nil {
		return nil, nil
	}
	t := &extv1beta1.SandboxTemplate{}
	if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, t); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, &lookupError{kind: "SandboxTemplate", name: name, err: err}
	}
	return t, nil
}

// sandboxObjects is a Sandbox and what it renders to (Pod, Service, PVCs:
// render.SandboxObjects), the way the controller would create them, with
// its defaults.
func sandboxObjects(sb *sandboxv1beta1.Sandbox, req admission.Request, d render.Defaults) ([]checked, error) {
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
	out := []checked{{sandboxv1beta1.GroupVersion.WithKind("Sandbox"), sb}}
	if req.Kind.Kind != "Sandbox" {
		// A template-made Sandbox is checked through its Pod; the Sandbox
		// object itself is the controller's.
		out = nil
	}
	children, err := render.SandboxObjects(probe, d)
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		gvk, _ := c.GVK()
		out = append(out, checked{gvk, c.Object})
	}
	return out, nil
}
