package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentsandbox/reconciler/tests"
)

// TestKubectlSandboxDiff runs `kubectl-sandbox diff` against the API server
// with the controller working: a new Sandbox and its children show as
// additions, nothing shows once applied and reconciled, a changed field
// shows, and a Sandbox the policies refuse is reported.
func TestKubectlSandboxDiff(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-sandbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-sandbox")
	build.Dir = tests.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-sandbox: %v\n%s", err, out)
	}
	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	if err := env.EnsureGVisor(context.Background()); err != nil {
		t.Fatal(err)
	}
	manifest := func(image, extra string) string {
		p := filepath.Join(dir, "sandbox.yaml")
		content := `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: diffed
  namespace: ` + ns + `
spec:
  service: true
  podTemplate:
    spec:
      runtimeClassName: gvisor
      containers:
      - name: agent
        image: ` + image + `
        ports: [{containerPort: 8080}]
` + extra
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	diff := func(file string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, "diff", "-f", file, "--kubeconfig", kubeconfig)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	file := manifest("agent:1", "")
	out, code := diff(file)
	if code != 1 || !strings.Contains(out, "(absent) Sandbox "+ns+"/diffed") || !strings.Contains(out, "(absent) Pod "+ns+"/diffed") ||
		!strings.Contains(out, "(absent) Service "+ns+"/diffed") {
		t.Fatalf("diff of a new Sandbox: exit %d\n%s", code, out)
	}

	// Apply it as the diff would, and let the controller make its children.
	apply := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager", "kubectl-sandbox", "-f", file)
	if b, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, b)
	}
	eventually(t, "pod and service", func() error {
		if _, err := get(t, ns, "diffed", &corev1.Service{}); err != nil {
			return err
		}
		_, err := get(t, ns, "diffed", &corev1.Pod{})
		return err
	})
	if out, code := diff(file); code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("diff after apply: exit %d\n%s", code, out)
	}

	out, code = diff(manifest("agent:2", ""))
	if code != 1 || !strings.Contains(out, "-      - image: agent:1") || !strings.Contains(out, "+      - image: agent:2") {
		t.Fatalf("diff of a changed image: exit %d\n%s", code, out)
	}

	out, code = diff(manifest("agent:1", "      hostPID: true\n"))
	if code != 1 || !strings.Contains(out, "would be refused") || !strings.Contains(out, "hostPID") {
		t.Fatalf("diff of a Sandbox the policies refuse: exit %d\n%s", code, out)
	}
}
