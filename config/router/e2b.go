package router

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// patchOp is one operation of AdmissionPolicyPatchE2B.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// AdmissionPolicyE2B returns AdmissionPolicy (the policy and its binding)
// with AdmissionPolicyPatchE2B applied, as kustomize applies it in the e2b
// component: for tools that install the router's rights themselves. The
// patch may only test a rule's message and replace a rule
// (/spec/validations/<n>[/message]).
func AdmissionPolicyE2B() ([]byte, error) {
	docs := strings.SplitN(string(AdmissionPolicy), "\n---\n", 2)
	if len(docs) != 2 {
		return nil, fmt.Errorf("admission-policy.yaml: want a policy and a binding")
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), vap); err != nil {
		return nil, fmt.Errorf("admission-policy.yaml: %w", err)
	}
	var ops []patchOp
	if err := yaml.UnmarshalStrict(AdmissionPolicyPatchE2B, &ops); err != nil {
		return nil, fmt.Errorf("e2b/admission-policy-patch.yaml: %w", err)
	}
	for _, op := range ops {
		rest, ok := strings.CutPrefix(op.Path, "/spec/validations/")
		index, field, _ := strings.Cut(rest, "/")
		n, err := strconv.Atoi(index)
		if !ok || err != nil || n < 0 || n >= len(vap.Spec.Validations) {
			return nil, fmt.Errorf("e2b/admission-policy-patch.yaml: path %s names no rule", op.Path)
		}
		switch {
		case op.Op == "test" && field == "message":
			var want string
			if err := json.Unmarshal(op.Value, &want); err != nil || vap.Spec.Validations[n].Message != want {
				return nil, fmt.Errorf("e2b/admission-policy-patch.yaml: rule %d's message is %q, not the one the patch expects", n, vap.Spec.Validations[n].Message)
			}
		case op.Op == "replace" && field == "":
			var v admissionv1.Validation
			if err := yaml.UnmarshalStrict(op.Value, &v); err != nil {
				return nil, fmt.Errorf("e2b/admission-policy-patch.yaml: %w", err)
			}
			vap.Spec.Validations[n] = v
		default:
			return nil, fmt.Errorf("e2b/admission-policy-patch.yaml: unsupported operation %s %s", op.Op, op.Path)
		}
	}
	out, err := yaml.Marshal(vap)
	if err != nil {
		return nil, err
	}
	return append(append(out, "---\n"...), docs[1]...), nil
}
