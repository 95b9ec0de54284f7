package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSchemasAcceptTheSamples(t *testing.T) {
	s, err := BuiltinSchemas()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(tests.RepoRoot(), "config", "samples", "sandbox*.yaml"))
	if len(files) < 4 {
		t.Fatalf("%d samples", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if errs := s.Validate(context.Background(), object(t, string(data)), nil); len(errs) > 0 {
			t.Errorf("%s: %v", filepath.Base(f), errs)
		}
	}
}

func TestSchemasJudgeAsTheAPIServer(t *testing.T) {
	s, err := BuiltinSchemas()
	if err != nil {
		t.Fatal(err)
	}
	const sandbox = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: box}
spec:
  podTemplate:
    spec:
      containers: [{name: a, image: a}]
`
	cases := []struct {
		name, obj, old, want string
	}{
		{"enum", strings.Replace(sandbox, "spec:\n  podTemplate", "spec:\n  operatingMode: Paused\n  podTemplate", 1), "",
			`spec.operatingMode: Unsupported value: "Paused"`},
		{"unknown field", strings.Replace(sandbox, "spec:\n  podTemplate", "spec:\n  replica: 1\n  podTemplate", 1), "",
			"spec.replica: Forbidden: unknown field"},
		{"missing podTemplate", "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: box}\nspec: {}\n", "",
			"spec.podTemplate: Required value"},
		{"bad name", strings.Replace(sandbox, "name: box", "name: Box_1", 1), "", "metadata.name: Invalid value"},
		{"volume claim templates are immutable",
			strings.Replace(sandbox, "spec:\n  podTemplate", "spec:\n  volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce]}}]\n  podTemplate", 1),
			sandbox, "volumeClaimTemplates"},
		{"pool replicas minimum", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: p}\nspec: {replicas: -1, sandboxTemplateRef: {name: t}}\n", "",
			"spec.replicas: Invalid value: -1"},
		{"claim env unique", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c}\nspec:\n  warmPoolRef: {name: p}\n  env: [{name: A, value: '1'}, {name: A, value: '2'}]\n", "",
			"spec.env"},
		{"unknown kind", "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbag\nmetadata: {name: x}\n", "", "apiVersion: Unsupported value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var old *unstructured.Unstructured
			if tc.old != "" {
				old = object(t, tc.old)
			}
			errs := s.Validate(context.Background(), object(t, tc.obj), old)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("errors %v do not mention %q", errs, tc.want)
			}
		})
	}
}
