package main

import (
	"strings"
	"testing"
)

const privilegedTemplate = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: root, namespace: team-a}
spec:
  envVarsInjectionPolicy: Allowed
  podTemplate:
    spec:
      runtimeClassName: gvisor
      containers:
      - name: shell
        image: busybox
        securityContext: {privileged: true}
`

const rootPool = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: root-pool, namespace: team-a}
spec:
  replicas: 0
  sandboxTemplateRef: {name: root}
`

const coldClaim = `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: cold, namespace: team-a}
spec:
  warmPoolRef: {name: root-pool}
  env: [{name: MODE, value: test}]
`

// TestPolicyCheckRendersTemplates: a template is judged by the Pod the
// Sandboxes made from it run, and so are a pool (even at zero replicas)
// and a cold-starting claim whose template is among the manifests.
func TestPolicyCheckRendersTemplates(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"template", privilegedTemplate, []string{
			"SandboxTemplate root: Pod team-a/root: privileged containers are not allowed: shell (policy agent-sandbox-baseline",
			"1 denied"}},
		{"pool", privilegedTemplate + "---\n" + rootPool, []string{
			"SandboxWarmPool root-pool: Pod team-a/root-pool-",
			"2 denied"}},
		{"cold claim", privilegedTemplate + "---\n" + rootPool + "---\n" + coldClaim, []string{
			"SandboxClaim cold: Pod team-a/cold: privileged containers are not allowed: shell",
			"3 denied"}},
		{"template name that cannot name a Service", strings.Replace(privilegedTemplate, "name: root,", "name: 1root,", 1), []string{
			"SandboxTemplate 1root: Pod team-a/template-member: privileged containers are not allowed: shell"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runCLI(t, tc.in, "policy", "check", "-f", "-")
			if code != exitFindings {
				t.Errorf("exit %d, want %d (stderr %s)", code, exitFindings, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	// The same template without privilege passes, NetworkPolicy and all.
	fixed := strings.Replace(privilegedTemplate, "        securityContext: {privileged: true}\n", "", 1)
	if out, stderr, code := runCLI(t, fixed+"---\n"+rootPool+"---\n"+coldClaim, "policy", "check", "-f", "-"); code != exitOK || !strings.Contains(out, "0 denied") {
		t.Errorf("compliant template, pool and claim: exit %d\n%s%s", code, out, stderr)
	}
}

// TestPolicyCheckSaysWhatItCouldNotCheck: a claim whose pool is elsewhere
// is checked alone and says so (not a failure); one that cannot be
// rendered at all fails the check, as the controller and webhook refuse it.
func TestPolicyCheckSaysWhatItCouldNotCheck(t *testing.T) {
	out, _, code := runCLI(t, coldClaim, "policy", "check", "-f", "-")
	if code != exitOK || !strings.Contains(out, "not rendered, so what it makes was not checked: SandboxWarmPool root-pool is not among the manifests") ||
		!strings.Contains(out, "1 not fully checked") {
		t.Errorf("claim without its pool: exit %d\n%s", code, out)
	}
	// The Service of a Sandbox is named after it: "9lives" cannot be.
	const unrenderable = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: 9lives}
spec:
  service: true
  podTemplate:
    spec:
      runtimeClassName: gvisor
      containers: [{name: agent, image: busybox}]
`
	out, _, code = runCLI(t, unrenderable, "policy", "check", "-f", "-")
	if code != exitFindings || !strings.Contains(out, "cannot be rendered (the controller and the webhook refuse it)") || !strings.Contains(out, "1 not renderable") {
		t.Errorf("unrenderable Sandbox: exit %d\n%s", code, out)
	}
}

// TestPolicyCheckModes: --bundle sets a bundle's mode, and a Namespace
// among the manifests sets the modes of the objects in it, as the
// controller and webhook do with the namespace's labels.
func TestPolicyCheckModes(t *testing.T) {
	const ns = `apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {policy.agents.x-k8s.io/baseline: warn}
`
	out, stderr, code := runCLI(t, privilegedTemplate, "policy", "check", "-f", "-", "--bundle", "runtime-isolation", "--bundle", "baseline=warn")
	if code != exitOK || !strings.Contains(out, "privileged containers are not allowed: shell (policy agent-sandbox-baseline, rule 0, Warn)") ||
		!strings.Contains(out, "0 denied, 1 warnings") {
		t.Errorf("--bundle baseline=warn: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = runCLI(t, ns+"---\n"+privilegedTemplate, "policy", "check", "-f", "-")
	if code != exitOK || !strings.Contains(out, "rule 0, Warn)") {
		t.Errorf("namespace labelled baseline=warn: exit %d\n%s%s", code, out, stderr)
	}
	// A typo in a mode label enforces, and says so.
	typo := strings.Replace(ns, "baseline: warn", "baseline: warning", 1)
	out, _, code = runCLI(t, typo+"---\n"+privilegedTemplate, "policy", "check", "-f", "-")
	if code != exitFindings || !strings.Contains(out, `"warning" is not a policy mode`) || !strings.Contains(out, "rule 0, Deny)") {
		t.Errorf("mode label typo: exit %d\n%s", code, out)
	}
	// Off bundles are not checked; restricted can be turned on.
	out, _, code = runCLI(t, privilegedTemplate, "policy", "check", "-f", "-", "--bundle", "baseline=off", "--bundle", "restricted=audit")
	if code != exitOK || strings.Contains(out, "agent-sandbox-baseline") || !strings.Contains(out, "Audit)") {
		t.Errorf("baseline off, restricted audit: exit %d\n%s", code, out)
	}
	if _, stderr, code := runCLI(t, privilegedTemplate, "policy", "check", "-f", "-", "--bundle", "baseline=deny"); code != exitUsage || !strings.Contains(stderr, "not a policy mode") {
		t.Errorf("bad mode: exit %d %s", code, stderr)
	}
}
