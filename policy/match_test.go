package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// denyAll is a policy whose one validation always fails, with the
// matchConstraints and the binding's matchResources given (indented YAML
// bodies; "" leaves the binding's out), so that a decision means a match.
func denyAll(t *testing.T, constraints, bindingMatch string) *Set {
	t.Helper()
	y := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: deny-all
spec:
  failurePolicy: Fail
  matchConstraints:
` + constraints + `
  validations:
  - expression: "false"
    message: matched
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: deny-all
spec:
  policyName: deny-all
  validationActions: [Deny]
`
	if bindingMatch != "" {
		y += "  matchResources:\n" + bindingMatch + "\n"
	}
	s, err := Load(Source{Name: "test.yaml", Data: []byte(y)})
	if err != nil {
		t.Fatalf("loading:\n%s\n%v", y, err)
	}
	return s
}

var (
	gvrPods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrServices   = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrSandboxes  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	gvrNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// checked is an object of a resource to check: kind, namespace ("" for
// cluster scope), name and labels.
func checked(gvr schema.GroupVersionResource, kind, namespace, name string, labels map[string]string) Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvr.GroupVersion().WithKind(kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	return Object{GVR: gvr, Object: u}
}

const podRules = `    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: [pods]
      operations: [CREATE]`

func TestMatching(t *testing.T) {
	pod := checked(gvrPods, "Pod", "default", "box", map[string]string{"team": "a"})
	cases := []struct {
		name                     string
		constraints, binding     string
		obj                      Object
		want                     bool
		wantsPods, wantsServices bool
	}{
		{name: "rule matches", constraints: podRules, obj: pod, want: true, wantsPods: true},
		{name: "other resource", constraints: podRules, obj: checked(gvrServices, "Service", "default", "box", nil), wantsPods: true},
		{name: "other operation", constraints: strings.Replace(podRules, "[CREATE]", "[UPDATE]", 1), obj: pod, wantsPods: true},
		{name: "any operation", constraints: strings.Replace(podRules, "[CREATE]", `["*"]`, 1), obj: pod, want: true, wantsPods: true},
		{name: "other version", constraints: strings.Replace(podRules, "[v1]", "[v2]", 1), obj: pod},
		{name: "wildcard resources", constraints: strings.NewReplacer(`[""]`, `["*"]`, "[v1]", `["*"]`, "[pods]", `["*"]`).Replace(podRules),
			obj: checked(gvrSandboxes, "Sandbox", "default", "box", nil), want: true, wantsPods: true, wantsServices: true},
		{name: "resources and subresources", constraints: strings.Replace(podRules, "[pods]", `["*/*"]`, 1), obj: pod, want: true, wantsPods: true, wantsServices: true},
		{name: "resource name", constraints: podRules + "\n      resourceNames: [box]", obj: pod, want: true, wantsPods: true},
		{name: "other resource name", constraints: podRules + "\n      resourceNames: [other]", obj: pod, wantsPods: true},
		{name: "namespaced scope", constraints: podRules + "\n      scope: Namespaced", obj: pod, want: true, wantsPods: true},
		{name: "cluster scope", constraints: podRules + "\n      scope: Cluster", obj: pod, wantsPods: true},
		{name: "cluster scope, a Namespace", constraints: strings.Replace(podRules, "[pods]", "[namespaces]", 1) + "\n      scope: Cluster",
			obj: checked(gvrNamespaces, "Namespace", "", "team-a", nil), want: true},
		{name: "namespaced scope, a Namespace", constraints: strings.Replace(podRules, "[pods]", "[namespaces]", 1) + "\n      scope: Namespaced",
			obj: checked(gvrNamespaces, "Namespace", "", "team-a", nil)},
		{name: "excluded by name", constraints: podRules + `
    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: [pods]
      operations: ["*"]
      resourceNames: [box]`, obj: pod, wantsPods: true},
		{name: "exclusion of another name", constraints: podRules + `
    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: [pods]
      operations: ["*"]
      resourceNames: [other]`, obj: pod, want: true, wantsPods: true},
		{name: "object selector matches", constraints: podRules + "\n    objectSelector:\n      matchLabels: {team: a}", obj: pod, want: true, wantsPods: true},
		{name: "object selector does not", constraints: podRules + "\n    objectSelector:\n      matchLabels: {team: b}", obj: pod, wantsPods: true},
		{name: "empty namespace selector selects all", constraints: podRules + "\n    namespaceSelector: {}", obj: pod, want: true, wantsPods: true},
		{name: "binding object selector", constraints: podRules,
			binding: "    objectSelector:\n      matchExpressions:\n      - {key: team, operator: NotIn, values: [a]}", obj: pod, wantsPods: true},
		{name: "binding resource rules narrow the policy's", constraints: strings.Replace(podRules, "[pods]", "[pods, services]", 1),
			binding: strings.Replace(podRules, "[pods]", "[services]", 1), obj: pod, wantsPods: true, wantsServices: true},
		{name: "matchPolicy Exact, other version", constraints: strings.Replace(podRules, "[v1]", "[v1alpha1]", 1) + "\n    matchPolicy: Exact",
			obj: checked(gvrSandboxes, "Sandbox", "default", "box", nil)},
		// No API server here to map and convert equivalent resources:
		// Equivalent matches as Exact.
		{name: "matchPolicy Equivalent, other version", constraints: strings.NewReplacer(`[""]`, "[agents.x-k8s.io]", "[v1]", "[v1alpha1]", "[pods]", "[sandboxes]").Replace(podRules) + "\n    matchPolicy: Equivalent",
			obj: checked(gvrSandboxes, "Sandbox", "default", "box", nil)},
		{name: "matchPolicy Equivalent, same version", constraints: strings.NewReplacer(`[""]`, "[agents.x-k8s.io]", "[v1]", "[v1beta1]", "[pods]", "[sandboxes]").Replace(podRules) + "\n    matchPolicy: Equivalent",
			obj: checked(gvrSandboxes, "Sandbox", "default", "box", nil), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := denyAll(t, tc.constraints, tc.binding)
			ds := s.Check(context.Background(), tc.obj)
			if got := len(ds) > 0; got != tc.want {
				t.Errorf("matched %v (decisions %v), want %v", got, ds, tc.want)
			}
			for _, d := range ds {
				if d.Message != "matched" || d.Rule != 0 || d.Action != Deny {
					t.Errorf("decision %+v, want the one validation's denial", d)
				}
			}
			if got := s.Wants(gvrPods); got != tc.wantsPods {
				t.Errorf("Wants(pods) = %v, want %v", got, tc.wantsPods)
			}
			if got := s.Wants(gvrServices); got != tc.wantsServices {
				t.Errorf("Wants(services) = %v, want %v", got, tc.wantsServices)
			}
		})
	}
}

// TestObjectSelectorSeesTheOldObject: as in the API server, an update is
// selected when the object before or after it carries the labels.
func TestObjectSelectorSeesTheOldObject(t *testing.T) {
	s := denyAll(t, strings.Replace(podRules, "[CREATE]", "[UPDATE]", 1)+"\n    objectSelector:\n      matchLabels: {team: a}", "")
	o := checked(gvrPods, "Pod", "default", "box", nil)
	o.Operation = admissionregistrationv1.Update
	if ds := s.Check(context.Background(), o); len(ds) != 0 {
		t.Fatalf("unlabeled update matched: %v", ds)
	}
	o.OldObject = checked(gvrPods, "Pod", "default", "box", map[string]string{"team": "a"}).Object
	if ds := s.Check(context.Background(), o); len(ds) != 1 {
		t.Errorf("update removing the label: decisions %v, want one", ds)
	}
}

// TestCheckAsWildcardSubresources: a policy on "*/*" is evaluated for the
// objects CheckAs converts (Wants used to miss it).
func TestCheckAsWildcardSubresources(t *testing.T) {
	s := denyAll(t, strings.Replace(podRules, "[pods]", `["*/*"]`, 1), "")
	ds, err := s.CheckAs(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, sandboxPod())
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		t.Errorf("decisions %v, want one", ds)
	}
}

func TestMatchLoadErrors(t *testing.T) {
	cases := []struct{ name, constraints, binding, want string }{
		{"subresource", strings.Replace(podRules, "[pods]", "[pods/status]", 1), "", `resource "pods/status": subresources are not supported`},
		{"excluded subresource", podRules + `
    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: ["*/status"]
      operations: ["*"]`, "", `resource "*/status": subresources are not supported`},
		{"namespace selector in a binding", podRules, "    namespaceSelector:\n      matchExpressions:\n      - {key: team, operator: Exists}",
			"binding deny-all: matchResources: namespaceSelector is not supported"},
		{"bad object selector", podRules + "\n    objectSelector:\n      matchExpressions:\n      - {key: team, operator: In}", "",
			"spec.matchConstraints: objectSelector:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: deny-all}
spec:
  matchConstraints:
` + tc.constraints + `
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deny-all}
spec:
  policyName: deny-all
  validationActions: [Deny]
`
			if tc.binding != "" {
				y += "  matchResources:\n" + tc.binding + "\n"
			}
			_, err := Load(Source{Name: "test.yaml", Data: []byte(y)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
