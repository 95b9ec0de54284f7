package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	celtypes "github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// Action is what a binding does with a failed validation, as in
// ValidatingAdmissionPolicyBinding.validationActions.
type Action string

// Actions.
const (
	Deny  Action = "Deny"
	Warn  Action = "Warn"
	Audit Action = "Audit"
)

// Decision is one failed validation: which policy, binding and rule, what to
// do about it, and the message for the user. The same value feeds
// conditions, events, webhook responses and CLI output.
type Decision struct {
	Policy  string `json:"policy"`
	Binding string `json:"binding"`
	// Rule is the index of the validation in the policy's validations.
	Rule   int    `json:"rule"`
	Action Action `json:"action"`
	// Reason is the validation's reason (Invalid unless the policy says).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
	// Object names what was checked: Kind namespace/name.
	Object string `json:"object"`
	// Bundle is the built-in bundle the policy comes from, if any; its
	// mode in the object's namespace chose Action.
	Bundle string `json:"bundle,omitempty"`
}

func (d Decision) String() string {
	return fmt.Sprintf("%s: %s (policy %s, rule %d, %s)", d.Object, d.Message, d.Policy, d.Rule, d.Action)
}

// Warned returns the decisions that warn.
func Warned(ds []Decision) []Decision {
	var out []Decision
	for _, d := range ds {
		if d.Action == Warn {
			out = append(out, d)
		}
	}
	return out
}

// Denied returns the decisions that deny.
func Denied(ds []Decision) []Decision {
	var out []Decision
	for _, d := range ds {
		if d.Action == Deny {
			out = append(out, d)
		}
	}
	return out
}

// LoadError is a policy that cannot be used: which document, policy and
// rule, and why. Column positions of CEL errors are in the message.
type LoadError struct {
	Source string
	Policy string
	// Rule is the index of the validation (or of the variable, match
	// condition or message expression named in Field), -1 when none.
	Rule    int
	Field   string
	Message string
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Policy != "" {
		fmt.Fprintf(&b, ": policy %s", e.Policy)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
		if e.Rule >= 0 {
			fmt.Fprintf(&b, "[%d]", e.Rule)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Set is a compiled set of policies, bindings and params, ready to check
// objects. It is immutable and safe for concurrent use.
type Set struct {
	policies []*compiled
	// digest identifies the sources the set was loaded from.
	digest string
	// defaults are the bundles' modes where a check names no namespace
	// modes (nil: bindings' own actions).
	defaults Modes
}

type compiled struct {
	policy *admissionregistrationv1.ValidatingAdmissionPolicy
	// bundle is the built-in bundle the policy came from ("" for others).
	bundle   string
	bindings []*bound
	matcher  matchconditions.Matcher
	// validations evaluates every validation expression at once; messages
	// holds one evaluator per messageExpression (nil where there is none),
	// evaluated only for a failed validation.
	validations plugincel.ConditionEvaluator
	messages    []plugincel.ConditionEvaluator
}

type bound struct {
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	params  []runtime.Object // nil entry: no params
	// paramMissing is set when the paramRef names params that do not exist.
	paramMissing bool
	actions      []Action
}

// Source is one file (or embedded bundle) of policy YAML.
type Source struct {
	Name string
	Data []byte
	// Bundle names the built-in bundle the source is (empty for files).
	Bundle string
}

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
	return set, nil
}

// Policies lists the names of the loaded policies.
func (s *Set) Policies() []string {
	var out []string
	for _, c := range s.policies {
		out = append(out, c.policy.Name)
	}
	return out
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

var celErrorColumn = regexp.MustCompile(`<input>:(\d+):(\d+)`)

// compile checks a policy for fields we do not support and compiles its
// expressions once, with the API server's composition environment.
func compile(source string, p *admissionregistrationv1.ValidatingAdmissionPolicy) (*compiled, error) {
	fail := func(field string, rule int, format string, args ...any) error {
		return &LoadError{Source: source, Policy: p.Name, Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)}
	}
	spec := p.Spec
	if len(spec.AuditAnnotations) > 0 {
		return nil, fail("spec.auditAnnotations", -1, "audit annotations are not supported (there is no audit log here); remove them")
	}
	if spec.MatchConstraints == nil || len(spec.MatchConstraints.ResourceRules) == 0 {
		return nil, fail("spec.matchConstraints.resourceRules", -1, "required: say which resources the policy checks")
	}
	if err := checkMatchResources(spec.MatchConstraints); err != nil {
		return nil, fail("spec.matchConstraints", -1, "%v", err)
	}
	if len(spec.Validations) == 0 {
		return nil, fail("spec.validations", -1, "required: a policy without validations checks nothing")
	}
	if spec.ParamKind != nil && (spec.ParamKind.APIVersion == "" || spec.ParamKind.Kind == "") {
		return nil, fail("spec.paramKind", -1, "apiVersion and kind are required")
	}

	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, fail("", -1, "building the CEL environment: %v", err)
	}
	hasParams := spec.ParamKind != nil
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	exprVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams}

	check := func(field string, i int, accessor plugincel.ExpressionAccessor, decls plugincel.OptionalVariableDeclarations) error {
		res := compiler.CompileCELExpression(accessor, decls, environment.StoredExpressions)
		if res.Error != nil {
			msg := res.Error.Detail
			if m := celErrorColumn.FindStringSubmatch(msg); m != nil {
				msg = fmt.Sprintf("line %s, column %s: %s", m[1], m[2], msg)
			}
			return fail(field, i, "%s", msg)
		}
		return nil
	}
	for i, v := range spec.Variables {
		acc := &validating.Variable{Name: v.Name, Expression: v.Expression}
		if err := check("spec.variables", i, acc, vars); err != nil {
			return nil, err
		}
		compiler.CompileAndStoreVariable(acc, vars, environment.StoredExpressions)
	}
	var matcher matchconditions.Matcher
	if len(spec.MatchConditions) > 0 {
		accs := make([]plugincel.ExpressionAccessor, len(spec.MatchConditions))
		for i := range spec.MatchConditions {
			accs[i] = (*matchconditions.MatchCondition)(&spec.MatchConditions[i])
			if err := check("spec.matchConditions", i, accs[i], vars); err != nil {
				return nil, err
			}
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(accs, vars, environment.StoredExpressions), spec.FailurePolicy, "policy", "validate", p.Name)
	}
	c := &compiled{policy: p, matcher: matcher, messages: make([]plugincel.ConditionEvaluator, len(spec.Validations))}
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	for i, v := range spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if err := check("spec.validations", i, validations[i], vars); err != nil {
			return nil, err
		}
		if v.MessageExpression != "" {
			m := &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			if err := check("spec.validations.messageExpression", i, m, exprVars); err != nil {
				return nil, err
			}
			c.messages[i] = compiler.CompileCondition([]plugincel.ExpressionAccessor{m}, exprVars, environment.StoredExpressions)
		}
	}
	c.validations = compiler.CompileCondition(validations, vars, environment.StoredExpressions)
	return c, nil
}

// failure is one failed validation (or an evaluation error, rule -1 when
// it is not tied to one validation).
type failure struct {
	rule            int
	reason, message string
}

// evaluate runs the policy's validations for one object and params the way
// the API server's validator does, except that a messageExpression is only
// evaluated for a validation that failed.
func (c *compiled) evaluate(ctx context.Context, attrs *admission.VersionedAttributes, request *admissionv1.AdmissionRequest, params runtime.Object) []failure {
	failClosed := c.policy.Spec.FailurePolicy == nil || *c.policy.Spec.FailurePolicy == admissionregistrationv1.Fail
	onError := func(rule int, err error) []failure {
		if !failClosed {
			return nil
		}
		return []failure{{rule: rule, reason: string(metav1.StatusReasonInvalid), message: err.Error()}}
	}
	if c.matcher != nil {
		m := c.matcher.Match(ctx, attrs, params, nil)
		if m.Error != nil {
			return onError(-1, m.Error)
		}
		if !m.Matches {
			return nil
		}
	}
	vars := plugincel.OptionalVariableBindings{VersionedParams: params}
	results, budget, err := c.validations.ForInput(ctx, attrs, request, vars, nil, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return onError(-1, err)
	}
	var out []failure
	for i, r := range results {
		if r.Error != nil {
			out = append(out, onError(i, r.Error)...)
			continue
		}
		if r.EvalResult == celtypes.True {
			continue
		}
		v := c.policy.Spec.Validations[i]
		f := failure{rule: i, reason: string(metav1.StatusReasonInvalid)}
		if v.Reason != nil {
			f.reason = string(*v.Reason)
		}
		if c.messages[i] != nil {
			if mr, left, err := c.messages[i].ForInput(ctx, attrs, request, vars, nil, budget); err == nil && len(mr) == 1 && mr[0].Error == nil && mr[0].EvalResult != nil {
				budget = left
				if msg, ok := mr[0].EvalResult.Value().(string); ok {
					msg = strings.TrimSpace(msg)
					if len(msg) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(msg, "\n") {
						f.message = msg
					}
				}
			}
		}
		if f.message == "" {
			f.message = strings.TrimSpace(v.Message)
		}
		if f.message == "" {
			f.message = "failed expression: " + strings.TrimSpace(v.Expression)
		}
		out = append(out, f)
	}
	return out
}

// checkMatchResources refuses the parts of MatchResources we cannot honour
// offline.
func checkMatchResources(m *admissionregistrationv1.MatchResources) error {
	if m.NamespaceSelector != nil && (len(m.NamespaceSelector.MatchLabels) > 0 || len(m.NamespaceSelector.MatchExpressions) > 0) {
		return errors.New("namespaceSelector is not supported (namespace labels are not known when checking offline); use objectSelector or matchConditions")
	}
	if m.ObjectSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(m.ObjectSelector); err != nil {
			return fmt.Errorf("objectSelector: %w", err)
		}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for _, r := range rules {
			for _, res := range r.Resources {
				if strings.Contains(res, "/") && res != "*/*" {
					return fmt.Errorf("resource %q: subresources are not supported", res)
				}
			}
		}
	}
	return nil
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
	if b.Spec.MatchResources != nil {
		if err := checkMatchResources(b.Spec.MatchResources); err != nil {
			return nil, fail("matchResources: %v", err)
		}
	}
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
