package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/webhooks"
)

// TestWebhookRefusesRuntimeClaimMetadata: kubectl apply of a SandboxClaim
// whose additionalPodMetadata carries a key a container runtime reads is
// refused by the webhook at once, with the key and the reason, whether or
// not its pool exists; an ordinary claim passes.
func TestWebhookRefusesRuntimeClaimMetadata(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed: %v", err)
	}
	set, err := policy.LoadConfig(policy.Config{Bundles: policy.DefaultBundles})
	if err != nil {
		t.Fatal(err)
	}
	holder := &policy.Holder{}
	holder.Set(set)
	serveValidator(t, &webhooks.Validator{Policy: holder, Reader: env.Client})

	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	apply := func(manifest string) (string, error) {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	claim := func(name, metadata string) string {
		return `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata:
  name: ` + name + `
spec:
  warmPoolRef:
    name: python-pool
  additionalPodMetadata:
` + metadata
	}

	cases := []struct {
		name, metadata, want string // want "" = admitted
	}{
		{"kata", "    annotations:\n      io.katacontainers.config.hypervisor.kernel_params: init=/bin/sh\n",
			`annotation "io.katacontainers.config.hypervisor.kernel_params": it could change the Sandbox's isolation: Kata Containers`},
		{"gvisor", "    annotations:\n      dev.gvisor.spec.mount.host.share: shared\n", `annotation "dev.gvisor.spec.mount.host.share"`},
		{"crio-label", "    labels:\n      io.kubernetes.cri-o.userns-mode: host\n", `label "io.kubernetes.cri-o.userns-mode"`},
		{"apparmor", "    annotations:\n      container.apparmor.security.beta.kubernetes.io/python: unconfined\n",
			`annotation "container.apparmor.security.beta.kubernetes.io/python": it could change the Sandbox's isolation`},
		{"ordinary", "    labels:\n      user: alice\n    annotations:\n      session: abc123\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := apply(claim(tc.name, tc.metadata))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("an ordinary claim was refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(out, `admission webhook "validate.agents.x-k8s.io" denied the request`) || !strings.Contains(out, tc.want) {
				t.Errorf("kubectl apply: %v\n%s\nwant a webhook denial containing %s", err, out, tc.want)
			}
		})
	}
}
