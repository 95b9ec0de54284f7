package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// doc is one parsed YAML document and where it came from.
type doc struct {
	source string
	bundle string
	obj    *unstructured.Unstructured
}

// Load parses and compiles the policies, bindings and params in the
// sources. Any unsupported field, invalid expression or dangling reference
// fails the whole load: a partial policy set would enforce less than its
// author meant.
func Load(sources ...Source) (*Set, error) {
	var docs []doc
	for _, src := range sources {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src.Data), 4096)
		for i := 0; ; i++ {
			var raw map[string]any
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, &LoadError{Source: fmt.Sprintf("%s: document %d", src.Name, i), Rule: -1, Message: err.Error()}
			}
			if len(raw) == 0 {
				continue
			}
			docs = append(docs, doc{source: fmt.Sprintf("%s: document %d", src.Name, i), bundle: src.Bundle, obj: &unstructured.Unstructured{Object: raw}})
		}
	}

	var errs []error
	failed := map[string]bool{}
	policies := map[string]*compiled{}
	var order []string
	var bindings []doc
	var params []doc
	for _, d := range docs {
		gvk := d.obj.GroupVersionKind()
		switch {
		case gvk.Group == admissionregistrationv1.GroupName && gvk.Kind == "ValidatingAdmissionPolicy":
			if gvk.Version != "v1" {
				errs = append(errs, &LoadError{Source: d.source, Rule: -1, Message: fmt.Sprintf("apiVersion %s is not supported; use admissionregistration.k8s.io/v1", gvk.GroupVersion())})
				continue
			}
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := strictConvert(d.obj, p); err != nil {
				failed[d.obj.GetName()] = true
				errs = append(errs, &LoadError{Source: d.source, Policy: d.obj.GetName(), Rule: -1, Message: err.Error()})
				continue
			}
			if _, dup := policies[p.Name]; dup {
				errs = append(errs, &LoadError{Source: d.source, Policy: p.Name, Rule: -1, Message: "defined twice"})
				continue
			}
			c, err := compile(d.source, p)
			if err != nil {
				failed[p.Name] = true
				errs = append(errs, err)
				continue
			}
			c.bundle = d.bundle
			policies[p.Name] = c
			order = append(order, p.Name)
		case gvk.Group == admissionregistrationv1.GroupName && gvk.Kind == "ValidatingAdmissionPolicyBinding":
			bindings = append(bindings, d)
		default:
			params = append(params, d)
		}
	}
	for _, d := range bindings {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		if err := strictConvert(d.obj, b); err != nil {
			errs = append(errs, &LoadError{Source: d.source, Rule: -1, Message: fmt.Sprintf("binding %s: %v", d.obj.GetName(), err)})
			continue
		}
		c := policies[b.Spec.PolicyName]
		if c == nil && failed[b.Spec.PolicyName] {
			continue // the policy's own error says it all
		}
		if c == nil {
			errs = append(errs, &LoadError{Source: d.source, Rule: -1, Message: fmt.Sprintf("binding %s names policy %q, which is not defined", b.Name, b.Spec.PolicyName)})
			continue
		}
		bb, err := bind(d.source, c.policy, b, params)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.bindings = append(c.bindings, bb)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	set := &Set{digest: digestOf(sources)}
	sort.Strings(order)
	for _, name := range order {
		set.policies = append(set.policies, policies[name])
	}
	set.memo = newMemo(readsOf(set.policies))
	return set, nil
}

// strictConvert turns a parsed document into a typed object, refusing
// fields the type does not have (a misspelt field would otherwise be
// silently ignored).
func strictConvert(obj *unstructured.Unstructured, out any) error {
	b, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(b, out)
}

// bind resolves a binding's params and actions.
func bind(source string, p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, params []doc) (*bound, error) {
	fail := func(format string, args ...any) error {
		return &LoadError{Source: source, Policy: p.Name, Rule: -1, Message: fmt.Sprintf("binding %s: ", b.Name) + fmt.Sprintf(format, args...)}
	}
	out := &bound{binding: b}
	if len(b.Spec.ValidationActions) == 0 {
		return nil, fail("validationActions is required (Deny, Warn and/or Audit)")
	}
	for _, a := range b.Spec.ValidationActions {
		switch Action(a) {
		case Deny, Warn, Audit:
			out.actions = append(out.actions, Action(a))
		default:
			return nil, fail("validationAction %q is not one of Deny, Warn, Audit", a)
		}
	}
	match, err := parseCriteria(b.Spec.MatchResources)
	if err != nil {
		return nil, fail("matchResources: %v", err)
	}
	out.match = match
	pk := p.Spec.ParamKind
	ref := b.Spec.ParamRef
	switch {
	case pk == nil && ref != nil:
		return nil, fail("paramRef is set but policy %s has no paramKind", p.Name)
	case pk != nil && ref == nil:
		return nil, fail("policy %s takes params (%s %s); set paramRef", p.Name, pk.APIVersion, pk.Kind)
	case pk == nil:
		out.params = []runtime.Object{nil}
		return out, nil
	}
	var selector labels.Selector
	if ref.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, fail("paramRef.selector: %v", err)
		}
		selector = s
	}
	if ref.Name == "" && selector == nil {
		return nil, fail("paramRef needs a name or a selector")
	}
	for _, d := range params {
		o := d.obj
		if o.GetAPIVersion() != pk.APIVersion || o.GetKind() != pk.Kind {
			continue
		}
		if ref.Namespace != "" && o.GetNamespace() != ref.Namespace {
			continue
		}
		if ref.Name != "" && o.GetName() != ref.Name {
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		out.params = append(out.params, o)
	}
	if len(out.params) == 0 {
		if ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.AllowAction {
			return out, nil
		}
		out.paramMissing = true
	}
	return out, nil
}
