package router

import (
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

func policies(t *testing.T, raw []byte) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want a policy and a binding", len(docs))
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), vap); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	return vap, binding
}

// TestE2BPolicyDiffersOnlyByPause: the E2B component's policy is the base
// one but for the operatingMode rule, which keeps Running and adds
// Suspended on claimed Sandboxes.
func TestE2BPolicyDiffersOnlyByPause(t *testing.T) {
	raw, err := AdmissionPolicyE2B()
	if err != nil {
		t.Fatal(err)
	}
	base, baseBinding := policies(t, AdmissionPolicy)
	e2b, e2bBinding := policies(t, raw)
	if !reflect.DeepEqual(baseBinding, e2bBinding) {
		t.Error("the bindings differ")
	}
	if len(base.Spec.Validations) != len(e2b.Spec.Validations) {
		t.Fatalf("the policies differ in number of rules")
	}
	diff := 0
	for i := range base.Spec.Validations {
		b, e := base.Spec.Validations[i], e2b.Spec.Validations[i]
		if reflect.DeepEqual(b, e) {
			continue
		}
		diff++
		if !strings.Contains(b.Expression, "operatingMode") || !strings.HasPrefix(e.Expression, b.Expression+" ||") ||
			!strings.Contains(e.Expression, "'Suspended'") || !strings.Contains(e.Expression, "'SandboxClaim'") {
			t.Errorf("rule %d differs beyond the pause allowance:\nbase: %s\ne2b:  %s", i, b.Expression, e.Expression)
		}
	}
	base.Spec.Validations, e2b.Spec.Validations = nil, nil
	if diff != 1 || !reflect.DeepEqual(base, e2b) {
		t.Errorf("want exactly the operatingMode rule to differ (%d rules differ, or the rest of the policy does)", diff)
	}
}
