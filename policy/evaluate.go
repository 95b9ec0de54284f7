package policy

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Object is one object to check: its group/version/resource, and its
// content as unstructured (the form CEL sees).
type Object struct {
	GVR       schema.GroupVersionResource
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured
	// Operation is CREATE unless set.
	Operation admissionregistrationv1.OperationType
}

// Check evaluates every policy that matches the object and returns the
// failed validations, one decision per binding action.
func (s *Set) Check(ctx context.Context, o Object) []Decision {
	if s == nil || o.Object == nil || !s.Wants(o.GVR) {
		return nil // nothing to judge, nor to key a memory by
	}
	op := o.Operation
	if op == "" {
		op = admissionregistrationv1.Create
	}
	gvk := o.Object.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, o.Object.GetName())
	if ns := o.Object.GetNamespace(); ns != "" {
		what = fmt.Sprintf("%s %s/%s", gvk.Kind, ns, o.Object.GetName())
	}
	key, keyed := s.memo.key(ctx, s, o, op)
	if keyed {
		if ds, ok := s.memo.get(key, what); ok {
			return ds
		}
	}
	decisions := s.check(ctx, o, op, what)
	if keyed {
		s.memo.put(key, decisions)
	}
	return decisions
}

// check evaluates every policy that matches o (see Check); what names o in
// the decisions.
func (s *Set) check(ctx context.Context, o Object, op admissionregistrationv1.OperationType, what string) []Decision {
	obj := o.Object
	gvk := obj.GroupVersionKind()
	var old runtime.Object
	if o.OldObject != nil {
		old = o.OldObject
	}
	attributes := admission.NewAttributesRecord(obj, old, gvk, obj.GetNamespace(), obj.GetName(), o.GVR, "",
		admission.Operation(op), nil, false, &user.DefaultInfo{Name: "agent-sandbox-policy-check"})
	var decisions []Decision
	var attrs *admission.VersionedAttributes
	for _, c := range s.policies {
		mode, moded := s.modeOf(ctx, c.bundle)
		if mode == ModeOff {
			continue
		}
		matched, err := c.match.matches(attributes)
		if err == nil && !matched {
			continue
		}
		for _, b := range c.bindings {
			if err != nil {
				// As the API server: a policy it cannot tell matches fails
				// as its failurePolicy says.
				if c.failClosed() {
					decisions = append(decisions, b.decide(c, moded, mode, -1, what, string(metav1.StatusReasonInvalid), "failed to configure policy: "+err.Error())...)
				}
				continue
			}
			if ok, berr := b.match.matches(attributes); berr != nil {
				if c.failClosed() {
					decisions = append(decisions, b.decide(c, moded, mode, -1, what, string(metav1.StatusReasonInvalid), "failed to configure binding: "+berr.Error())...)
				}
				continue
			} else if !ok {
				continue
			}
			if b.paramMissing {
				decisions = append(decisions, b.decide(c, moded, mode, -1, what, string(metav1.StatusReasonInvalid),
					fmt.Sprintf("the params of binding %s (%s %s) do not exist", b.binding.Name, c.policy.Spec.ParamKind.Kind, paramName(b.binding.Spec.ParamRef)))...)
				continue
			}
			if attrs == nil {
				attrs = &admission.VersionedAttributes{
					Attributes:         attributes,
					VersionedKind:      gvk,
					VersionedObject:    admission.NewLazyObject(obj),
					VersionedOldObject: admission.NewLazyObject(old),
				}
			}
			for _, params := range b.params {
				for _, f := range c.evaluate(ctx, o.GVR, attrs, params) {
					decisions = append(decisions, b.decide(c, moded, mode, f.rule, what, f.reason, f.message)...)
				}
			}
		}
	}
	return decisions
}

func paramName(ref *admissionregistrationv1.ParamRef) string {
	if ref == nil {
		return ""
	}
	if ref.Namespace != "" {
		return ref.Namespace + "/" + ref.Name
	}
	return ref.Name
}

// decide makes the decisions of a failed validation: one per binding
// action, or, for a bundle whose mode is set (moded), the one action of
// its mode.
func (b *bound) decide(c *compiled, moded bool, mode Mode, rule int, what, reason, message string) []Decision {
	actions := b.actions
	if moded {
		actions = []Action{mode.action()}
	}
	out := make([]Decision, 0, len(actions))
	for _, a := range actions {
		out = append(out, Decision{Policy: c.policy.Name, Binding: b.binding.Name, Rule: rule, Action: a, Reason: reason, Message: message, Object: what, Bundle: c.bundle})
	}
	return out
}
