package policy

import (
	"context"
	"fmt"
	"regexp"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	constraints, err := parseCriteria(spec.MatchConstraints)
	if err != nil {
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
	var conditions matchconditions.Matcher
	if len(spec.MatchConditions) > 0 {
		accs := make([]plugincel.ExpressionAccessor, len(spec.MatchConditions))
		for i := range spec.MatchConditions {
			accs[i] = (*matchconditions.MatchCondition)(&spec.MatchConditions[i])
			if err := check("spec.matchConditions", i, accs[i], vars); err != nil {
				return nil, err
			}
		}
		conditions = matchconditions.NewMatcher(compiler.CompileCondition(accs, vars, environment.StoredExpressions), spec.FailurePolicy, "policy", "validate", p.Name)
	}
	// As the API server's validating admission plugin builds its
	// validator, from expressions checked one by one above.
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(spec.Validations)) // nil: none
	for i, v := range spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if err := check("spec.validations", i, validations[i], vars); err != nil {
			return nil, err
		}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			if err := check("spec.validations.messageExpression", i, messages[i], exprVars); err != nil {
				return nil, err
			}
		}
	}
	validator := validating.NewValidator(
		compiler.CompileCondition(validations, vars, environment.StoredExpressions),
		nil, // match conditions: see evaluate
		compiler.CompileCondition(nil, vars, environment.StoredExpressions), // no audit annotations (refused above)
		compiler.CompileCondition(messages, exprVars, environment.StoredExpressions),
		spec.FailurePolicy, nil)
	return &compiled{policy: p, match: constraints, conditions: conditions, validator: validator}, nil
}

// failure is one failed validation (or an evaluation error, rule -1 when
// it is not tied to one validation).
type failure struct {
	rule            int
	reason, message string
}

// evaluate runs the policy's match conditions, then its validations, for
// one object and params, with the API server's validator.
func (c *compiled) evaluate(ctx context.Context, gvr schema.GroupVersionResource, attrs *admission.VersionedAttributes, params runtime.Object) []failure {
	if c.conditions != nil {
		// Matched here rather than by the validator, whose one error
		// decision would not tell a match condition's error from a
		// policy's only validation's.
		m := c.conditions.Match(ctx, attrs, params, nil)
		if m.Error != nil { // failurePolicy Fail (under Ignore it does not match)
			return []failure{{rule: -1, reason: string(metav1.StatusReasonInvalid), message: m.Error.Error()}}
		}
		if !m.Matches {
			return nil
		}
	}
	res := c.validator.Validate(ctx, gvr, attrs, params, nil, celconfig.RuntimeCELCostBudget, nil)
	// One decision per validation, in order; else one error decision for
	// an evaluation stopped before it could judge each (out of budget).
	aligned := len(res.Decisions) == len(c.policy.Spec.Validations)
	var out []failure
	for i, d := range res.Decisions {
		if d.Action != validating.ActionDeny {
			continue // admitted, or an error under failurePolicy Ignore
		}
		f := failure{rule: i, reason: string(d.Reason), message: d.Message}
		if !aligned {
			f.rule = -1
		}
		if f.reason == "" {
			f.reason = string(metav1.StatusReasonInvalid)
		}
		out = append(out, f)
	}
	return out
}

// failClosed reports whether errors deny (failurePolicy Fail, the default).
func (c *compiled) failClosed() bool {
	return c.policy.Spec.FailurePolicy == nil || *c.policy.Spec.FailurePolicy == admissionregistrationv1.Fail
}
