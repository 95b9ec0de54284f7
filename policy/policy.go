package policy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
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
// objects. It is immutable (but for the verdicts it remembers) and safe
// for concurrent use.
type Set struct {
	policies []*compiled
	// digest identifies the sources the set was loaded from.
	digest string
	// defaults are the bundles' modes where a check names no namespace
	// modes (nil: bindings' own actions).
	defaults Modes
	// memo remembers decisions by what the policies observe of an object
	// (nil: they observe all of it).
	memo *memo
}

type compiled struct {
	policy *admissionregistrationv1.ValidatingAdmissionPolicy
	// bundle is the built-in bundle the policy came from ("" for others).
	bundle   string
	bindings []*bound
	// match selects the requests the policy applies to (matchConstraints);
	// conditions are its matchConditions (nil: none).
	match      *criteria
	conditions matchconditions.Matcher
	// validator evaluates the validations and their messageExpressions.
	validator validating.Validator
}

type bound struct {
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// match is the binding's matchResources (nil: all the policy matches).
	match  *criteria
	params []runtime.Object // nil entry: no params
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

// Policies lists the names of the loaded policies.
func (s *Set) Policies() []string {
	var out []string
	for _, c := range s.policies {
		out = append(out, c.policy.Name)
	}
	return out
}
