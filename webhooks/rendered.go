package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/render/preview"
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
	from := schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}
	if from.Version == "" || from.Version == "v1beta1" {
		return req.Object.Raw, nil
	}
	kind, to := req.Kind.Kind, convert.Hub(req.Kind.Kind).String()
	if !convert.Known(kind, from.String(), to) {
		return nil, fmt.Errorf("%s %s is not a version this webhook knows", kind, from)
	}
	out, err := convert.Between(kind, from.String(), to, req.Object.Raw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// rendered decodes the object under review and renders what it stands for
// (render/preview, as the CLI does): the object itself, then what the
// policies judge of what it makes. A pool or claim whose pool or template
// does not exist (yet) is checked alone, and so is a warm claim (it takes
// a member rendered with its pool) and a claim the controller will reject
// with the public API's reason in its status; any other failure is an
// error.
func (v *Validator) rendered(ctx context.Context, req admission.Request) ([]checked, error) {
	kind := req.Kind.Kind
	raw, err := hubObject(req)
	if err != nil {
		return nil, err
	}
	self := convert.NewHub(kind)
	if self == nil {
		return nil, fmt.Errorf("kind %s is not validated here", kind)
	}
	if err := json.Unmarshal(raw, self); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	gvk := convert.Hub(kind).WithKind(kind)
	if kind == "SandboxTemplate" {
		// Checked as it will be stored: in its namespace, under its name.
		self.SetNamespace(namespaceOf(self.GetNamespace(), req))
		if self.GetName() == "" {
			self.SetName(req.Name)
		}
	}
	out := []checked{{gvk, self}}
	if c, ok := self.(*extv1beta1.SandboxClaim); ok && !render.NeedsColdStart(c) {
		return out, nil
	}
	probe := self.DeepCopyObject().(convert.Object)
	preview.Fill(probe, req.Namespace, req.Name)
	in := preview.Inputs{Object: probe, ControllerNamespace: v.ControllerNamespace}
	defaults := render.CurrentDefaults(v.Defaults)
	in.Defaults = func(*sandboxv1beta1.Sandbox) render.Defaults { return defaults }
	if v.Reader != nil {
		in.Lookup = readerLookup{ctx: ctx, reader: v.Reader}
	}
	p, err := preview.Render(in)
	var rejected *render.ClaimRejection
	if errors.As(err, &rejected) {
		// The claim is refused by the controller with the public API's
		// reason in its status (envVarsInjectionPolicy and friends):
		// nothing is created from it.
		return out, nil
	} else if err != nil {
		return nil, err
	}
	judged := p.Made
	switch kind {
	case "SandboxTemplate":
		// The Sandbox it makes, then its NetworkPolicy.
		judged = append(p.Member, p.Made...)
	case "SandboxWarmPool", "SandboxClaim":
		// Judged through the Pod, Service and PVCs of the Sandbox it
		// makes; the Sandbox object itself is the controller's.
		judged = p.Member
	}
	for _, o := range judged {
		out = append(out, checked{o.GVK, o.Object})
	}
	return out, nil
}

func namespaceOf(ns string, req admission.Request) string {
	if ns != "" {
		return ns
	}
	return req.Namespace
}

// readerLookup reads a claim's pool and a pool's template: nil without an
// error when it does not exist (it may be created later; the controller
// checks before it creates anything).
type readerLookup struct {
	ctx    context.Context
	reader client.Reader
}

func (l readerLookup) Template(namespace, name string) (*extv1beta1.SandboxTemplate, error) {
	t := &extv1beta1.SandboxTemplate{}
	if found, err := l.get(namespace, name, "SandboxTemplate", t); !found {
		return nil, err
	}
	return t, nil
}

func (l readerLookup) Pool(namespace, name string) (*extv1beta1.SandboxWarmPool, error) {
	p := &extv1beta1.SandboxWarmPool{}
	if found, err := l.get(namespace, name, "SandboxWarmPool", p); !found {
		return nil, err
	}
	return p, nil
}

func (l readerLookup) get(namespace, name, kind string, into client.Object) (bool, error) {
	err := l.reader.Get(l.ctx, types.NamespacedName{Namespace: namespace, Name: name}, into)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, &lookupError{kind: kind, name: name, err: err}
	}
	return true, nil
}
