package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const plainSandbox = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: plain}
spec:
  podTemplate:
    spec:
      containers: [{name: agent, image: python:3.13-slim}]
`

func runtimeClass(name string) string {
	return "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: " + name + "}\nhandler: " + name + "\n"
}

// --default-runtime-class has the controller's semantics offline: auto
// takes the first isolating class among the manifests' RuntimeClasses,
// else gvisor; the command says which default it used.
func TestDefaultRuntimeClass(t *testing.T) {
	cases := []struct {
		name, input string
		args        []string
		code        int
		stdout      []string // each must appear
		stderr      string
	}{
		{"auto without RuntimeClasses: gvisor", plainSandbox, []string{"render", "-f", "-"}, 0,
			[]string{"runtimeClassName: gvisor"}, "default runtime class gvisor (no RuntimeClass in the manifests"},
		{"auto with the manifests' RuntimeClasses, in the allowlist's order", plainSandbox + runtimeClass("runc") + runtimeClass("kata-clh") + runtimeClass("kata"),
			[]string{"render", "-f", "-"}, 0, []string{"runtimeClassName: kata\n"}, "default runtime class kata (the RuntimeClasses in the manifests)"},
		{"auto, no isolating RuntimeClass among the manifests", plainSandbox + runtimeClass("runc"), []string{"policy", "check", "-f", "-"}, 1,
			[]string{"the cluster has no isolating RuntimeClass to default to"}, "no default runtime class: none of gvisor, kata, kata-qemu, kata-clh, kata-fc among the RuntimeClasses in the manifests"},
		{"none", plainSandbox, []string{"policy", "check", "-f", "-", "--default-runtime-class", "none"}, 1,
			[]string{"runtimeClassName (unset) is not allowed"}, "no default runtime class (--default-runtime-class=none)"},
		{"a name", plainSandbox, []string{"render", "-f", "-", "--default-runtime-class", "kata-qemu"}, 0,
			[]string{"runtimeClassName: kata-qemu"}, "default runtime class kata-qemu (--default-runtime-class)"},
		{"a name outside the allowlist", plainSandbox, []string{"policy", "check", "-f", "-", "--default-runtime-class", "runc"}, 1,
			[]string{"runtimeClassName runc is not allowed for sandboxes"}, "not an isolating class"},
		{"an explicit class needs no default", strings.Replace(plainSandbox, "    spec:\n", "    spec:\n      runtimeClassName: kata\n", 1),
			[]string{"render", "-f", "-"}, 0, []string{"runtimeClassName: kata\n"}, ""},
		{"not a setting", plainSandbox, []string{"render", "-f", "-", "--default-runtime-class", "Not_A_Class"}, 2,
			nil, "want auto, none or a RuntimeClass name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runCLI(t, tc.input, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if (tc.stderr == "") != (stderr == "") || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want it to say %q", stderr, tc.stderr)
			}
		})
	}
}

// A pool's members mirror the template (no runtime class written into
// them); their Pods get the default, which policy check judges.
func TestPoolMembersMirrorTheTemplate(t *testing.T) {
	const in = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: python}
spec:
  podTemplate:
    spec:
      containers: [{name: agent, image: python:3.13-slim}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: pool}
spec:
  replicas: 1
  sandboxTemplateRef: {name: python}
`
	out, stderr, code := runCLI(t, in, "render", "-f", "-")
	if code != 0 || strings.Contains(out, "runtimeClassName") || !strings.Contains(out, "kind: Sandbox") {
		t.Errorf("exit %d; a member names a runtime class, or there is none:\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, in, "policy", "check", "-f", "-"); code != 0 || !strings.Contains(stderr, "default runtime class gvisor") {
		t.Errorf("policy check: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := runCLI(t, in+runtimeClass("runc"), "policy", "check", "-f", "-"); code != 1 || !strings.Contains(out, "no isolating RuntimeClass") {
		t.Errorf("policy check without an isolating class: exit %d\n%s", code, out)
	}
}

// With a cluster (diff, --from-cluster) and no RuntimeClass among the
// manifests, auto follows the cluster's RuntimeClasses.
func TestDefaultRuntimeClassFromTheCluster(t *testing.T) {
	var stderr bytes.Buffer
	o := &options{defaultRuntime: "auto", stderr: &stderr, runtimeClasses: func() ([]string, error) { return []string{"kata-fc", "kata-clh"}, nil }}
	if got := o.runtimeDefaults(nil).RuntimeClassName; got != "kata-clh" || !strings.Contains(stderr.String(), "default runtime class kata-clh (the cluster's RuntimeClasses)") {
		t.Errorf("default %q, stderr %q", got, stderr.String())
	}
	// Resolved once per command.
	if o.runtimeDefaults(nil); strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("said more than once: %q", stderr.String())
	}
	stderr.Reset()
	o = &options{defaultRuntime: "auto", stderr: &stderr, runtimeClasses: func() ([]string, error) { return nil, errors.New("forbidden") }}
	if got := o.runtimeDefaults(nil).RuntimeClassName; got != "gvisor" || !strings.Contains(stderr.String(), "cannot list the cluster's RuntimeClasses (forbidden)") {
		t.Errorf("default %q, stderr %q", got, stderr.String())
	}
}
