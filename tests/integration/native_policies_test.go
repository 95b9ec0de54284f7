package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/tests"
)

// TestNativeBaselineMatchesOffline installs config/policies/baseline.yaml in
// the API server as a native ValidatingAdmissionPolicy (bound to this test's
// namespace only) and checks, for each Pod Security Standards baseline
// control and volume rule, that the API server refuses the sandbox Pod with
// the very message the controller's own engine gives for it, and admits a
// compliant Pod. So the generated native policies stay in step with the
// bundle the controller enforces.
func TestNativeBaselineMatchesOffline(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	data, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "policies", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	offline, err := policy.Load(policy.Source{Name: "config/policies/baseline.yaml", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("baseline.yaml has %d documents, want a policy and a binding", len(docs))
	}
	vap := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), vap); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	// Only this namespace, so other tests sharing the API server are not
	// affected.
	name := "baseline-" + ns
	vap.Name, binding.Name, binding.Spec.PolicyName = name, name, name
	if binding.Spec.MatchResources == nil {
		binding.Spec.MatchResources = &admissionv1.MatchResources{}
	}
	binding.Spec.MatchResources.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	if err := env.Client.Create(ctx, vap); err != nil {
		t.Fatalf("the API server refused the baseline policy: %v", err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatalf("the API server refused the baseline binding: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), vap)
	})

	n := 0
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		n++
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", n),
				Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "0badc0de"}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				SecurityContext:              &corev1.PodSecurityContext{},
				Containers:                   []corev1.Container{{Name: "agent", Image: "python:3.13-slim", SecurityContext: &corev1.SecurityContext{}}},
			},
		}
		mutate(p)
		return p
	}
	// The policy takes effect once the API server has loaded it.
	deadline := time.Now().Add(time.Minute)
	for {
		err := env.Client.Create(ctx, pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }))
		if err != nil && strings.Contains(err.Error(), "hostNetwork, hostPID and hostIPC are not allowed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the baseline policy never took effect (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   string // "" = admitted
		// apiWant, when set, is what the API server says instead of the
		// offline message: it copies the deprecated AppArmor annotation
		// into the container's appArmorProfile before admission, so the
		// field rule refuses it there.
		apiWant string
	}{
		{"compliant", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "container_t"}
		}, "", ""},
		{"seccomp Unconfined", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, "Unconfined is not allowed): agent", ""},
		{"AppArmor Unconfined", func(p *corev1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, "appArmorProfile must be RuntimeDefault or Localhost", ""},
		{"AppArmor annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/agent": "unconfined"}
		}, "AppArmor annotations may only name", "appArmorProfile must be RuntimeDefault or Localhost (Unconfined is not allowed): agent"},
		{"seccomp annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
		}, "seccomp annotations may only name", ""},
		{"SELinux type", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, "seLinuxOptions.type must be", ""},
		{"SELinux user", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{User: "system_u"}
		}, "seLinuxOptions.user and seLinuxOptions.role must not be set: pod", ""},
		{"nfs", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.1", Path: "/"}}}}
		}, "use a PersistentVolumeClaim: share", ""},
		{"inline CSI", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "keys", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}}}
		}, "inline CSI volumes are not allowed", ""},
		{"probe host", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}}}
		}, "probes and lifecycle hooks must not set host", ""},
		{"token", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(true) },
			"automountServiceAccountToken must not be true", ""},
		{"token Secret", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "default-token-x7k2q"}}}}
		}, "ServiceAccount token Secrets (named <account>-token-<suffix>) must not be mounted", ""},
		{"runtime key", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"io.katacontainers.config.hypervisor.kernel_params": "init=/bin/sh"}
		}, "OCI hooks read are not allowed (they can change how the sandbox is isolated): io.katacontainers.config.hypervisor.kernel_params", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.mutate)
			probe := p.DeepCopy()
			probe.APIVersion, probe.Kind = "v1", "Pod"
			ds, err := offline.CheckAll(ctx, probe)
			if err != nil {
				t.Fatal(err)
			}
			err = env.Client.Create(ctx, p)
			if tc.want == "" {
				if err != nil || len(ds) > 0 {
					t.Fatalf("a compliant Pod: API server %v, offline %v", err, ds)
				}
				return
			}
			if len(ds) != 1 || !strings.Contains(ds[0].Message, tc.want) {
				t.Fatalf("offline decisions %v, want one containing %q", ds, tc.want)
			}
			if err == nil {
				t.Fatalf("the API server admitted it; offline: %s", ds[0].Message)
			}
			want := ds[0].Message
			if tc.apiWant != "" {
				want = tc.apiWant
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the API server said %q, want %q", err, want)
			}
		})
	}
}
