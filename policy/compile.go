package policy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	celtypes "github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

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
