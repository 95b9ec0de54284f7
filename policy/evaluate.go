package policy

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
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
	if s == nil || o.Object == nil {
		return nil
	}
	op := o.Operation
	if op == "" {
		op = admissionregistrationv1.Create
	}
	obj := o.Object
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
	if ns := obj.GetNamespace(); ns != "" {
		what = fmt.Sprintf("%s %s/%s", gvk.Kind, ns, obj.GetName())
	}
	var old runtime.Object
	if o.OldObject != nil {
		old = o.OldObject
	}
	var decisions []Decision
	var attrs *admission.VersionedAttributes
	var request *admissionv1.AdmissionRequest
	for _, c := range s.policies {
		mode, moded := s.modeOf(ctx, c.bundle)
		if mode == ModeOff || !matches(c.policy.Spec.MatchConstraints, o.GVR, op, obj) {
			continue
		}
		for _, b := range c.bindings {
			if b.binding.Spec.MatchResources != nil && !matches(b.binding.Spec.MatchResources, o.GVR, op, obj) {
				continue
			}
			if b.paramMissing {
				decisions = append(decisions, b.decide(c, moded, mode, -1, what, string(metav1.StatusReasonInvalid),
					fmt.Sprintf("the params of binding %s (%s %s) do not exist", b.binding.Name, c.policy.Spec.ParamKind.Kind, paramName(b.binding.Spec.ParamRef)))...)
				continue
			}
			if attrs == nil {
				attrs = &admission.VersionedAttributes{
					Attributes: admission.NewAttributesRecord(obj, old, gvk, obj.GetNamespace(), obj.GetName(), o.GVR, "",
						admission.Operation(op), nil, false, &user.DefaultInfo{Name: "agent-sandbox-policy-check"}),
					VersionedKind:      gvk,
					VersionedObject:    admission.NewLazyObject(obj),
					VersionedOldObject: admission.NewLazyObject(old),
				}
				request = plugincel.CreateAdmissionRequest(attrs.Attributes, metav1.GroupVersionResource(o.GVR), metav1.GroupVersionKind(gvk))
			}
			for _, params := range b.params {
				for _, f := range c.evaluate(ctx, attrs, request, params) {
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

// matches applies MatchResources' resource rules, exclusions and object
// selector to an object.
func matches(m *admissionregistrationv1.MatchResources, gvr schema.GroupVersionResource, op admissionregistrationv1.OperationType, obj *unstructured.Unstructured) bool {
	if m == nil {
		return true
	}
	if m.ObjectSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(m.ObjectSelector)
		if err != nil || !sel.Matches(labels.Set(obj.GetLabels())) {
			return false
		}
	}
	in := func(rules []admissionregistrationv1.NamedRuleWithOperations) bool {
		for _, r := range rules {
			if ruleMatches(r, gvr, op, obj) {
				return true
			}
		}
		return false
	}
	if len(m.ResourceRules) > 0 && !in(m.ResourceRules) {
		return false
	}
	return !in(m.ExcludeResourceRules)
}

func ruleMatches(r admissionregistrationv1.NamedRuleWithOperations, gvr schema.GroupVersionResource, op admissionregistrationv1.OperationType, obj *unstructured.Unstructured) bool {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == "*" || x == v {
				return true
			}
		}
		return false
	}
	opOK := false
	for _, o := range r.Operations {
		if o == admissionregistrationv1.OperationAll || o == op {
			opOK = true
		}
	}
	if !opOK || !has(r.APIGroups, gvr.Group) || !has(r.APIVersions, gvr.Version) || !has(r.Resources, gvr.Resource) {
		return false
	}
	if len(r.ResourceNames) > 0 && !has(r.ResourceNames, obj.GetName()) {
		return false
	}
	if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
		namespaced := obj.GetNamespace() != ""
		if (*r.Scope == admissionregistrationv1.NamespacedScope) != namespaced {
			return false
		}
	}
	return true
}
