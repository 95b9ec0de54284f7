package policy

import (
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// criteria is a MatchResources (a policy's matchConstraints or a binding's
// matchResources) with its selectors parsed once, at load, for the API
// server's matcher.
type criteria struct {
	resources         admissionregistrationv1.MatchResources
	namespace, object labels.Selector
}

var _ matching.MatchCriteria = (*criteria)(nil)

func (c *criteria) GetParsedNamespaceSelector() (labels.Selector, error) { return c.namespace, nil }
func (c *criteria) GetParsedObjectSelector() (labels.Selector, error)    { return c.object, nil }
func (c *criteria) GetMatchResources() admissionregistrationv1.MatchResources {
	return c.resources
}

// parseCriteria checks m for what we cannot honour offline and parses its
// selectors. A selector left out selects everything, as the API server's
// defaulting ({}) makes it.
func parseCriteria(m *admissionregistrationv1.MatchResources) (*criteria, error) {
	if m == nil {
		return nil, nil
	}
	if m.NamespaceSelector != nil && (len(m.NamespaceSelector.MatchLabels) > 0 || len(m.NamespaceSelector.MatchExpressions) > 0) {
		return nil, errors.New("namespaceSelector is not supported (namespace labels are not known when checking offline); use objectSelector or matchConditions")
	}
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for _, r := range rs {
			for _, res := range r.Resources {
				if strings.Contains(res, "/") && res != "*/*" {
					return nil, fmt.Errorf("resource %q: subresources are not supported", res)
				}
			}
		}
	}
	c := &criteria{resources: *m, namespace: labels.Everything(), object: labels.Everything()}
	if m.ObjectSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(m.ObjectSelector)
		if err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
		c.object = sel
	}
	return c, nil
}

// matcher is the API server's matcher of policies and bindings to
// requests (rules with operations, groups, versions, resources, names and
// scope; exclusions; object selector; matchPolicy). It has no namespaces
// to look at: parseCriteria refuses namespace selectors, so it never asks.
// Objects have no equivalent resources here (there is no API server to
// convert them), so matchPolicy Equivalent matches as Exact.
var matcher = matching.NewMatcher(noNamespaces{}, nil)

// objectInterfaces gives the matcher an empty equivalent-resource mapper.
var objectInterfaces = admission.NewObjectInterfacesFromScheme(runtime.NewScheme())

// matches reports whether the request attrs is selected by c (nil: by
// everything).
func (c *criteria) matches(attrs admission.Attributes) (bool, error) {
	if c == nil {
		return true, nil
	}
	ok, _, _, err := matcher.Matches(attrs, objectInterfaces, c)
	return ok, err
}

// wants reports whether c's resource rules can select objects of gvr,
// whatever the operation, scope, name or labels: the cheap test that lets
// callers skip converting objects no policy looks at.
func (c *criteria) wants(gvr schema.GroupVersionResource) bool {
	if c == nil || len(c.resources.ResourceRules) == 0 {
		return true
	}
	attrs := admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "", "", gvr, "", "", nil, false, nil)
	for _, r := range c.resources.ResourceRules {
		rule := r.RuleWithOperations
		rule.Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
		rule.Scope = nil
		if (&rules.Matcher{Rule: rule, Attr: attrs}).Matches() {
			return true
		}
	}
	return false
}

// noNamespaces is the namespace lister of a matcher that knows no
// namespaces: it is never asked (see matcher), and says so if it is.
type noNamespaces struct{}

var errNoNamespaces = errors.New("policy: namespace labels are not known when checking offline")

func (noNamespaces) List(labels.Selector) ([]*corev1.Namespace, error) { return nil, errNoNamespaces }
func (noNamespaces) Get(name string) (*corev1.Namespace, error) {
	return nil, apierrors.NewInternalError(errNoNamespaces)
}

var _ corev1listers.NamespaceLister = noNamespaces{}
