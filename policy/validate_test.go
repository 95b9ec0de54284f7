package policy

import (
	"context"
	"strings"
	"testing"
)

// evalPolicy has a validation with a messageExpression and a reason, one
// that cannot be evaluated on objects without spec (an error), and a match
// condition that errors on objects labeled broken.
const evalPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: eval}
spec:
  failurePolicy: FAILURE
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}
  matchConditions:
  - name: not-broken
    expression: "!has(object.metadata.labels) || !('broken' in object.metadata.labels) || int(object.metadata.labels.broken) > 0"
  variables:
  - name: name
    expression: object.metadata.name
  validations:
  - expression: "variables.name == 'ok'"
    messageExpression: "'name ' + variables.name + ' is not ok'"
    reason: Forbidden
  - expression: "object.spec.missing == 1"
    message: "  spec.missing must be 1  "
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: eval}
spec:
  policyName: eval
  validationActions: [Deny]
`

func TestEvaluation(t *testing.T) {
	cases := []struct {
		name, failurePolicy string
		labels              map[string]string
		want                []Decision // Policy, Binding, Action and Object left out
	}{
		{name: "fail closed", failurePolicy: "Fail", want: []Decision{
			{Rule: 0, Reason: "Forbidden", Message: "name box is not ok"},
			{Rule: 1, Reason: "Invalid", Message: "no such key: spec"},
		}},
		{name: "errors ignored", failurePolicy: "Ignore", want: []Decision{
			{Rule: 0, Reason: "Forbidden", Message: "name box is not ok"},
		}},
		{name: "match condition error", failurePolicy: "Fail", labels: map[string]string{"broken": "yes"}, want: []Decision{
			{Rule: -1, Reason: "Invalid", Message: "type conversion error from 'string' to 'int'"},
		}},
		{name: "match condition error ignored", failurePolicy: "Ignore", labels: map[string]string{"broken": "yes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(Source{Name: "eval.yaml", Data: []byte(strings.Replace(evalPolicy, "FAILURE", tc.failurePolicy, 1))})
			if err != nil {
				t.Fatal(err)
			}
			ds := s.Check(context.Background(), checked(gvrPods, "Pod", "default", "box", tc.labels))
			if len(ds) != len(tc.want) {
				t.Fatalf("decisions %+v, want %d", ds, len(tc.want))
			}
			for i, d := range ds {
				w := tc.want[i]
				if d.Rule != w.Rule || d.Reason != w.Reason || !strings.Contains(d.Message, w.Message) ||
					d.Policy != "eval" || d.Binding != "eval" || d.Action != Deny || d.Object != "Pod default/box" {
					t.Errorf("decision %d: %#v, want %#v", i, d, w)
				}
			}
		})
	}
}
