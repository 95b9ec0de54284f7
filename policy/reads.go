package policy

import (
	"fmt"
	"slices"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// reads is what a set's policies can observe of an object: a tree of the
// fields their expressions (validations, messages, variables, match
// conditions) reach from object and oldObject, and that their selectors
// match on. Two objects whose projections (project) are equal get the same
// decisions from the set, which is what lets a set remember its verdicts
// (memo). The analysis only ever errs towards reading more: whatever it
// cannot follow reads the whole value.
type reads struct {
	// all: the whole value is read.
	all bool
	// keys: the keys of a map are read (a comprehension iterates over
	// it), not its values; a list iterated over is read whole.
	keys bool
	// fields are the map's fields read. A field without reads of its own
	// is tested for presence (has()) only.
	fields map[string]*reads
	// name: the object's name is read (resourceNames, request.name).
	name bool
}

// at returns the node of path, made when missing.
func (r *reads) at(path []string) *reads {
	n := r
	for _, f := range path {
		if n.fields == nil {
			n.fields = map[string]*reads{}
		}
		next := n.fields[f]
		if next == nil {
			next = &reads{}
			n.fields[f] = next
		}
		n = next
	}
	return n
}

// celParser parses as the API server's CEL environment does for policies:
// the standard macros and optional syntax. Macros it does not know (two-
// variable comprehensions, cel.bind) stay calls, whose arguments are read
// whole.
var celParser = func() *parser.Parser {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true))
	if err != nil {
		panic(err)
	}
	return p
}()

// readsOf analyses every expression and selector of the policies.
func readsOf(policies []*compiled) *reads {
	r := &reads{}
	for _, c := range policies {
		spec := c.policy.Spec
		var exprs []string
		for _, v := range spec.Validations {
			exprs = append(exprs, v.Expression, v.MessageExpression)
		}
		for _, v := range spec.Variables {
			exprs = append(exprs, v.Expression)
		}
		for _, m := range spec.MatchConditions {
			exprs = append(exprs, m.Expression)
		}
		for _, a := range spec.AuditAnnotations {
			exprs = append(exprs, a.ValueExpression)
		}
		for _, e := range exprs {
			if e == "" {
				continue
			}
			parsed, errs := celParser.Parse(common.NewTextSource(e))
			if len(errs.GetErrors()) > 0 {
				r.all = true // cannot tell: everything
				continue
			}
			r.walk(parsed.Expr(), false)
		}
		r.selected(spec.MatchConstraints)
		for _, b := range c.bindings {
			r.selected(b.binding.Spec.MatchResources)
		}
	}
	return r
}

// selected adds what matching by m reads: the labels its object selector
// names (their presence for Exists and DoesNotExist, else their values)
// and the name when a rule names resources.
func (r *reads) selected(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if s := m.ObjectSelector; s != nil {
		for k := range s.MatchLabels {
			r.at([]string{"metadata", "labels", k}).all = true
		}
		for _, e := range s.MatchExpressions {
			n := r.at([]string{"metadata", "labels", e.Key})
			if e.Operator != "Exists" && e.Operator != "DoesNotExist" {
				n.all = true
			}
		}
	}
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for _, rule := range rs {
			if len(rule.ResourceNames) > 0 {
				r.name = true
			}
		}
	}
}

// walk adds what e reads; ranged is set when e is the range a
// one-variable comprehension iterates over.
func (r *reads) walk(e ast.Expr, ranged bool) {
	switch e.Kind() {
	case ast.IdentKind:
		switch e.AsIdent() {
		case "object", "oldObject":
			r.all = true
		case "request", "authorizer":
			// The request's attributes (and an authorizer's checks of
			// them) name the object: as its name is read.
			r.name = true
		}
	case ast.SelectKind:
		if path, test, ok := chain(e); ok {
			n := r.at(path)
			switch {
			case test: // has(): presence, already recorded by at
			case ranged:
				n.keys = true
			default:
				n.all = true
			}
			return
		}
		r.walk(e.AsSelect().Operand(), false)
	case ast.CallKind:
		c := e.AsCall()
		if x, ok := comparedToNull(c); ok {
			// x == null: whether x is there (and what it is), which a
			// projection keeps of every value it reaches.
			if path, _, isChain := chain(x); isChain {
				r.at(path)
				return
			}
			if x.Kind() == ast.IdentKind && (x.AsIdent() == "object" || x.AsIdent() == "oldObject") {
				return
			}
		}
		if c.IsMemberFunction() {
			r.walk(c.Target(), false)
		}
		for _, a := range c.Args() {
			r.walk(a, false)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		r.walk(c.IterRange(), !c.HasIterVar2())
		r.walk(c.AccuInit(), false)
		r.walk(c.LoopCondition(), false)
		r.walk(c.LoopStep(), false)
		r.walk(c.Result(), false)
	case ast.ListKind:
		for _, x := range e.AsList().Elements() {
			r.walk(x, false)
		}
	case ast.MapKind:
		for _, x := range e.AsMap().Entries() {
			r.walk(x.AsMapEntry().Key(), false)
			r.walk(x.AsMapEntry().Value(), false)
		}
	case ast.StructKind:
		for _, x := range e.AsStruct().Fields() {
			r.walk(x.AsStructField().Value(), false)
		}
	case ast.LiteralKind, ast.UnspecifiedExprKind:
	default:
		r.all = true // a kind of expression this does not know: everything
	}
}

// comparedToNull returns x of x == null, x != null (or null == x).
func comparedToNull(c ast.CallExpr) (ast.Expr, bool) {
	if (c.FunctionName() != operators.Equals && c.FunctionName() != operators.NotEquals) || len(c.Args()) != 2 {
		return nil, false
	}
	isNull := func(e ast.Expr) bool { return e.Kind() == ast.LiteralKind && e.AsLiteral().Type() == types.NullType }
	switch a, b := c.Args()[0], c.Args()[1]; {
	case isNull(b):
		return a, true
	case isNull(a):
		return b, true
	}
	return nil, false
}

// chain returns the fields of a select chain rooted at object or oldObject
// (object.spec.x: spec, x), and whether its last select is a presence test.
// Both roots share one tree: a projection applies it to either.
func chain(e ast.Expr) (path []string, test, ok bool) {
	var rev []string // the fields, last first
	for i := 0; e.Kind() == ast.SelectKind; i++ {
		s := e.AsSelect()
		if s.IsTestOnly() {
			if i > 0 {
				return nil, false, false // has() inside a chain is not a select CEL writes
			}
			test = true
		}
		rev = append(rev, s.FieldName())
		e = s.Operand()
	}
	if e.Kind() != ast.IdentKind || (e.AsIdent() != "object" && e.AsIdent() != "oldObject") {
		return nil, false, false
	}
	slices.Reverse(rev)
	return rev, test, true
}

// project is what of v the reads observe: read values whole, maps reduced
// to the fields read (and their keys when iterated), and values only
// tested for presence reduced to their shape (null, map, list or a
// scalar's type). Values no read reaches are left out.
func (r *reads) project(v any) any {
	if r.all {
		return v
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		if len(r.fields) == 0 && !r.keys {
			return shape(v)
		}
		return v // a list or scalar where a map's fields are read: whole
	}
	out := make(map[string]any, len(r.fields))
	if r.keys {
		for k, x := range m {
			out[k] = shape(x)
		}
	}
	for k, sub := range r.fields {
		if x, ok := m[k]; ok {
			out[k] = sub.project(x)
		}
	}
	return out
}

// shape is the kind of v, for a value only tested for presence.
func shape(v any) any {
	switch v.(type) {
	case nil:
		return nil
	case map[string]any:
		return map[string]any{}
	case []any:
		return []any{}
	default:
		return fmt.Sprintf("%T", v)
	}
}
