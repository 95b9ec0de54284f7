package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/golden"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestRenderIsTheControllersRender renders every golden Sandbox case with
// the CLI and compares it, object by object and byte for byte, with what the
// controller's render produces: the golden desired.yaml for cases without
// observations, and render.Sandbox with no observations otherwise.
func TestRenderIsTheControllersRender(t *testing.T) {
	const uid = "5f0d7c2e-0000-4000-8000-000000000001"
	for _, c := range golden.Cases(t, "sandbox") {
		t.Run(c.Name, func(t *testing.T) {
			var sb sandboxv1beta1.Sandbox
			if err := yaml.UnmarshalStrict(c.Read(t, "sandbox.yaml"), &sb); err != nil {
				t.Fatal(err)
			}
			if sb.UID == "" {
				sb.UID = types.UID(uid)
			}
			in, err := yaml.Marshal(&sb)
			if err != nil {
				t.Fatal(err)
			}
			// The case's default runtime class (observed.yaml), else none.
			var obs struct {
				DefaultRuntimeClass string `json:"defaultRuntimeClass"`
			}
			if data, err := os.ReadFile(c.Path("observed.yaml")); err == nil {
				if err := yaml.Unmarshal(data, &obs); err != nil {
					t.Fatal(err)
				}
			}
			setting := obs.DefaultRuntimeClass
			if setting == "" {
				setting = "none"
			}
			out, stderr, code := runCLI(t, string(in), "render", "-f", "-", "--default-runtime-class", setting)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}

			var want []string
			if _, err := os.Stat(c.Path("observed.yaml")); os.IsNotExist(err) {
				var d struct {
					Pod     any   `json:"pod"`
					Service any   `json:"service"`
					PVCs    []any `json:"pvcs"`
				}
				if err := yaml.Unmarshal(c.Read(t, "desired.yaml"), &d); err != nil {
					t.Fatal(err)
				}
				for _, o := range append([]any{d.Pod, d.Service}, d.PVCs...) {
					if o != nil {
						b, _ := yaml.Marshal(o)
						want = append(want, string(b))
					}
				}
			} else {
				probe := sb.DeepCopy()
				if probe.Namespace == "" {
					probe.Namespace = "default"
				}
				desired, err := render.Sandbox(render.SandboxInputs{Sandbox: probe, Defaults: render.Defaults{RuntimeClassName: obs.DefaultRuntimeClass}})
				if err != nil {
					t.Fatal(err)
				}
				var objs []any
				if desired.Pod != nil {
					objs = append(objs, desired.Pod)
				}
				if desired.Service != nil {
					objs = append(objs, desired.Service)
				}
				for _, p := range desired.PVCs {
					objs = append(objs, p)
				}
				for _, o := range objs {
					b, _ := yaml.Marshal(o)
					want = append(want, string(b))
				}
			}
			got := strings.Split(out, "---\n")
			if out == "" {
				got = nil
			}
			if len(got) != len(want) {
				t.Fatalf("CLI rendered %d objects, the controller %d:\n%s", len(got), len(want), out)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("object %d differs:\n%s", i, golden.Diff("controller", want[i], got[i]))
				}
			}
		})
	}
}

// TestMixedDirectory snapshots every command's output for a directory of
// mixed manifests: samples, a privileged Sandbox, invalid objects, a
// ConfigMap.
func TestMixedDirectory(t *testing.T) {
	dir := filepath.Join(golden.Dir(), "cli", "mixed")
	input := filepath.Join(dir, "input")
	// Paths in the output are relative to the repository root.
	rel, err := filepath.Rel(tests.RepoRoot(), input)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(tests.RepoRoot())
	for _, tc := range []struct {
		file string
		args []string
		code int
	}{
		{"render.yaml", []string{"render", "-f", rel}, 1},
		{"render-names.txt", []string{"render", "-f", rel, "-o", "name"}, 1},
		{"validate.txt", []string{"validate", "-f", rel}, 1},
		{"validate.json", []string{"validate", "-f", rel, "-o", "json"}, 1},
		{"policy-check.txt", []string{"policy", "check", "-f", rel}, 1},
		{"policy-check.json", []string{"policy", "check", "-f", rel, "-o", "json"}, 1},
		{"policy-check-restricted.txt", []string{"policy", "check", "-f", filepath.Join(rel, "sandbox.yaml"), "--bundle", "restricted"}, 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out, stderr, code := runCLI(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr: %s)", code, tc.code, stderr)
			}
			golden.Assert(t, filepath.Join(dir, tc.file), []byte(out+stderrSection(stderr)))
		})
	}
}

func stderrSection(s string) string {
	if s == "" {
		return ""
	}
	return "# stderr:\n" + s
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badPolicy := write("policy.yaml", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}]\n  validations:\n  - expression: 'object.spec.(('\n")
	syntax := write("syntax.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no input", []string{"render"}, 2, "no input"},
		{"missing file", []string{"validate", "-f", filepath.Join(dir, "nope.yaml")}, 2, "no such file"},
		{"yaml syntax", []string{"render", "-f", syntax}, 2, "syntax.yaml: document 1: error converting YAML to JSON: yaml: line 6"},
		{"invalid CEL", []string{"policy", "check", "-f", syntax, "--policy", badPolicy}, 2, "policy p: spec.validations[0]: line 1, column"},
		{"unknown bundle", []string{"policy", "export", "--bundle", "lenient"}, 2, `no built-in policy bundle "lenient"`},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"bad output", []string{"render", "-f", syntax, "-o", "xml"}, 2, "-o xml"},
		{"up: no nodes", []string{"up", "--nodes", "0"}, 2, "--nodes must be at least 1"},
		{"up: stray argument", []string{"up", "now"}, 2, "unexpected arguments [now]"},
		{"up: no cluster binaries", []string{"up", "--workdir", dir, "--bin-dir", dir, "--controller", "none"}, 1, "kwokctl not found in " + dir},
		{"up: no samples dir", []string{"up", "--workdir", dir, "--controller", "none", "--samples", filepath.Join(dir, "nope")}, 1, "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.want)
			}
			if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
				t.Errorf("stack trace in the output: %s", stderr)
			}
		})
	}
}

// down without a cluster has nothing to stop and succeeds (scripts call it
// unconditionally).
func TestDownWithoutCluster(t *testing.T) {
	stdout, stderr, code := runCLI(t, "", "down", "--workdir", t.TempDir(), "--name", "none")
	if code != 0 || !strings.Contains(stdout, "nothing to stop") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestPolicyExportLoadsBack(t *testing.T) {
	out, stderr, code := runCLI(t, "", "policy", "export", "--bundle", "runtime-isolation", "--bundle", "baseline")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kind: ValidatingAdmissionPolicy", "kind: ValidatingAdmissionPolicyBinding", "kind: ConfigMap"} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %q", want)
		}
	}
	// What was exported is a valid policy source again.
	f := filepath.Join(t.TempDir(), "exported.yaml")
	if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "", "policy", "export", "--policy", f); code != 0 {
		t.Errorf("the export does not load back: %s", stderr)
	}
}

// TestV1alpha1Input: the deprecated version renders as v1beta1 would and
// validates against its own schema (replicas 2 refused with the reason).
func TestV1alpha1Input(t *testing.T) {
	const alpha = `apiVersion: agents.x-k8s.io/v1alpha1
kind: Sandbox
metadata: {name: quickstart}
spec:
  replicas: REPLICAS
  podTemplate:
    spec:
      runtimeClassName: gvisor
      containers: [{name: agent, image: python:3.13-slim}]
`
	out, stderr, code := runCLI(t, strings.Replace(alpha, "REPLICAS", "1", 1), "render", "-f", "-", "-o", "name")
	if code != 0 || out != "pod/quickstart\n" {
		t.Errorf("render of a running v1alpha1 Sandbox: exit %d, %q %s", code, out, stderr)
	}
	out, _, code = runCLI(t, strings.Replace(alpha, "REPLICAS", "0", 1), "render", "-f", "-", "-o", "name")
	if code != 0 || out != "" {
		t.Errorf("render of a suspended v1alpha1 Sandbox: exit %d, %q", code, out)
	}
	if out, _, code := runCLI(t, strings.Replace(alpha, "REPLICAS", "1", 1), "validate", "-f", "-"); code != 0 {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, strings.Replace(alpha, "REPLICAS", "2", 1), "validate", "-f", "-")
	if code != 1 || !strings.Contains(out, "spec.replicas: Invalid value: 2: a Sandbox runs at most one Pod") {
		t.Errorf("validate replicas 2: exit %d\n%s", code, out)
	}
}

// TestV1alpha1Extensions: deprecated template, pool and claim manifests
// render as their v1beta1 forms (the claim through its shadow pool).
func TestV1alpha1Extensions(t *testing.T) {
	const in = `apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxTemplate
metadata: {name: python}
spec:
  podTemplate:
    spec:
      runtimeClassName: gvisor
      containers: [{name: agent, image: python:3.13-slim}]
---
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxWarmPool
metadata: {name: shadow-pool-python}
spec:
  replicas: 1
  sandboxTemplateRef: {name: python}
---
apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxClaim
metadata: {name: mine}
spec:
  sandboxTemplateRef: {name: python}
  warmpool: default
`
	out, stderr, code := runCLI(t, in, "render", "-f", "-", "-o", "name")
	if code != 0 || !strings.Contains(out, "networkpolicy/python-network-policy") || !strings.Contains(out, "sandbox/mine") ||
		!strings.Contains(out, "sandbox/shadow-pool-python-") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := runCLI(t, in, "validate", "-f", "-"); code != 0 {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
}
