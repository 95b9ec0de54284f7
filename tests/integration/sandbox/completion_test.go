package sandbox

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

// TestKubectlSandboxCompletion: kubectl's completion hook
// (kubectl_complete-sandbox __complete ..., as kubectl runs it) offers the
// claims and Sandboxes of the namespace the flags name, listed from the API
// server with the user's identity: another namespace's names never, and
// nothing to a user who may not list them.
func TestKubectlSandboxCompletion(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/kubectl-sandbox", "./cmd/kubectl_complete-sandbox")
	build.Dir = tests.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-sandbox and kubectl_complete-sandbox: %v\n%s", err, out)
	}
	kubeconfig := env.Kubeconfig(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	ctx := context.Background()
	sandbox := func(ns, name string) client.Object {
		return &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo:1"}}},
			}}}}
	}
	for _, obj := range []client.Object{
		&extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-claim"},
			Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}}},
		sandbox(ns, "beta-sandbox"), sandbox(ns, "bravo-sandbox"), sandbox(other, "elsewhere"),
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(args ...string) (names []string, directive string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "kubectl_complete-sandbox"), append([]string{"__complete"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl_complete-sandbox __complete %q: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[:len(lines)-1], lines[len(lines)-1]
	}
	const noFiles, noSpace = ":4", ":2"
	for _, tc := range []struct {
		name      string
		args      []string
		want      []string
		directive string
	}{
		{"exec", []string{"exec", "--kubeconfig", kubeconfig, "-n", ns, ""},
			[]string{"alpha-claim\tSandboxClaim", "beta-sandbox\tSandbox", "bravo-sandbox\tSandbox"}, noFiles},
		{"exec, a prefix, old flag spelling", []string{"exec", "-kubeconfig", kubeconfig, "-namespace", ns, "be"}, []string{"beta-sandbox\tSandbox"}, noFiles},
		{"exec, the command", []string{"exec", "--kubeconfig", kubeconfig, "-n", ns, "beta-sandbox", "--", ""}, nil, noFiles},
		{"cp upload target", []string{"cp", "--kubeconfig", kubeconfig, "-n", ns, "./data.csv", "b"},
			[]string{"beta-sandbox:\tSandbox", "bravo-sandbox:\tSandbox"}, noSpace},
		{"cp download source", []string{"cp", "--kubeconfig", kubeconfig, "-n", ns, "al"}, []string{"alpha-claim:\tSandboxClaim"}, noSpace},
		{"another namespace", []string{"exec", "--kubeconfig", kubeconfig, "-n", other, ""}, []string{"elsewhere\tSandbox"}, noFiles},
		{"-n", []string{"exec", "--kubeconfig", kubeconfig, "-n", ns[:len(ns)-1]}, []string{ns}, noFiles},
		// A user with no rights in the namespace learns no names.
		{"a user who may not list", []string{"exec", "--kubeconfig", kubeconfig, "--as", "mallory", "-n", ns, ""}, nil, noFiles},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, directive := complete(tc.args...)
			if !slices.Equal(names, tc.want) || directive != tc.directive {
				t.Errorf("completions %q %s, want %q %s", names, directive, tc.want, tc.directive)
			}
		})
	}
}
