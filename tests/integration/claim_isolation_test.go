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
		{"istio", "    labels:\n      sidecar.istio.io/inject: \"false\"\n", `label "sidecar.istio.io/inject": it could change the Sandbox's isolation: Istio`},
		{"multus", "    annotations:\n      k8s.v1.cni.cncf.io/networks: host-net\n", `annotation "k8s.v1.cni.cncf.io/networks": it could change the Sandbox's isolation: Multus`},
		{"calico", "    annotations:\n      cni.projectcalico.org/ipAddrs: '[\"10.0.0.9\"]'\n", `annotation "cni.projectcalico.org/ipAddrs"`},
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

	// A Sandbox or a template whose Pod would carry such a key is refused
	// by the baseline bundle, judged on the Pod it renders.
	podMeta := `    metadata:
      annotations:
        io.katacontainers.config.hypervisor.kernel_params: init=/bin/sh
    spec:
      runtimeClassName: gvisor
      containers:
      - name: main
        image: python:3.13
`
	for _, m := range []string{`apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: kata-keys
spec:
  podTemplate:
` + podMeta, `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: kata-keys
spec:
  podTemplate:
` + podMeta} {
		out, err := apply(m)
		want := "labels and annotations that container runtimes, the kubelet or OCI hooks read are not allowed (they can change how the sandbox is isolated): io.katacontainers.config.hypervisor.kernel_params"
		if err == nil || !strings.Contains(out, `denied the request`) || !strings.Contains(out, want) {
			t.Errorf("kubectl apply: %v\n%s\nwant a webhook denial containing %s", err, out, want)
		}
	}
}
