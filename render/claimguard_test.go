package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func guardTemplate(policy extv1beta1.InjectionPolicy) *extv1beta1.SandboxTemplate {
	t := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Namespace: "ns"}}
	t.Spec.VolumeClaimTemplatesPolicy = policy
	t.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	t.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "shared", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets"}}},
		{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	t.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{
		vct("workspace", func(s *corev1.PersistentVolumeClaimSpec) {
			s.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "golden-image"}
		}),
	}
	return t
}

func vct(name string, mutate ...func(*corev1.PersistentVolumeClaimSpec)) sandboxv1beta1.PersistentVolumeClaimTemplate {
	v := sandboxv1beta1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: name}}
	v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	v.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	for _, m := range mutate {
		m(&v.Spec)
	}
	return v
}

func guardClaim(mutate func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	c.Spec.WarmPoolRef.Name = "pool"
	mutate(c)
	return c
}

// A claim's additional Pod metadata cannot carry keys a container runtime
// reads: each is refused with the key and the reason, warm or cold.
func TestClaimMetadataRuntimeKeys(t *testing.T) {
	cases := []struct {
		key, value string
		label      bool
		want       string // "" = accepted
	}{
		{key: "io.katacontainers.config.hypervisor.kernel_params", want: "Kata Containers"},
		{key: "io.katacontainers.config.hypervisor.enable_debug", label: true, value: "true", want: "Kata Containers"},
		{key: "dev.gvisor.spec.mount.data.share", want: "gVisor"},
		{key: "dev.gvisor.flag.network", want: "gVisor"},
		{key: "io.kubernetes.cri-o.Devices", want: "CRI-O"},
		{key: "io.kubernetes.cri-o.userns-mode", want: "CRI-O"},
		{key: "io.kubernetes.cri.sandbox-id", want: "containerd"},
		{key: "io.kubernetes.pod.name", want: "kubelet"},
		{key: "io.containerd.cri.runtime-handler", want: "containerd"},
		{key: "io.containers.trace-syscall", want: "OCI hooks"},
		{key: "run.oci.handler", want: "crun"},
		{key: "module.wasm.image/variant", want: "WebAssembly"},
		{key: "org.systemd.property.SuccessAction", want: "systemd"},
		{key: "org.criu.config", want: "CRIU"},
		{key: "container.apparmor.security.beta.kubernetes.io/main", want: "AppArmor"},
		{key: "seccomp.security.alpha.kubernetes.io/pod", want: "seccomp"},
		{key: "container.seccomp.security.alpha.kubernetes.io/main", want: "seccomp"},
		{key: "cdi.k8s.io/gpu", want: "devices"},
		{key: "cpu-quota.crio.io", want: "crio.io domain"},
		{key: "seccomp-profile.kubernetes.cri-o.io/main", want: "cri-o.io domain"},
		{key: "IO.KataContainers.config", want: "Kata Containers"},
		// Keys CNI plugins and service meshes read.
		{key: "k8s.v1.cni.cncf.io/networks", want: "Multus"},
		{key: "v1.multus-cni.io/default-network", want: "Multus"},
		{key: "sidecar.istio.io/inject", label: true, value: "false", want: "Istio"},
		{key: "traffic.sidecar.istio.io/excludeOutboundIPRanges", want: "outside the mesh"},
		{key: "cni.projectcalico.org/ipAddrs", want: "Calico"},
		// Ordinary keys are fine, including ones that merely look alike.
		{key: "team", value: "ml"},
		{key: "example.com/io.katacontainers.note"},
		{key: "notcrio.io/x"},
		{key: "kata", value: "yes", label: true},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			c := guardClaim(func(c *extv1beta1.SandboxClaim) {
				m := map[string]string{tc.key: tc.value}
				if tc.label {
					c.Spec.AdditionalPodMetadata.Labels = m
				} else {
					c.Spec.AdditionalPodMetadata.Annotations = m
				}
			})
			rej := ValidateClaimMetadata(c)
			if tc.want == "" {
				if rej != nil {
					t.Fatalf("refused: %s", rej.Message)
				}
				return
			}
			if rej == nil {
				t.Fatal("accepted")
			}
			if rej.Reason != extv1beta1.ReasonInvalidMetadata || !strings.Contains(rej.Message, `"`+tc.key+`"`) ||
				!strings.Contains(rej.Message, "isolation") || !strings.Contains(rej.Message, tc.want) {
				t.Errorf("rejection %+v, want InvalidMetadata naming %q, isolation and %q", rej, tc.key, tc.want)
			}
			// The cold path refuses it the same way.
			if _, err := ClaimSandbox(ClaimInputs{Claim: c, Template: guardTemplate("")}); err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("ClaimSandbox: %v, want the same refusal", err)
			}
		})
	}
}

// A claim's volume claim templates cannot replace a template volume of
// another kind, nor attach existing data unless the template's own volume
// claim template of that name already does, with the same value.
func TestClaimVolumeClaimTemplateGuards(t *testing.T) {
	snapshot := func(name string) func(*corev1.PersistentVolumeClaimSpec) {
		return func(s *corev1.PersistentVolumeClaimSpec) {
			s.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: name}
		}
	}
	cases := []struct {
		name   string
		policy extv1beta1.InjectionPolicy
		vcts   []sandboxv1beta1.PersistentVolumeClaimTemplate
		want   string // "" = accepted
	}{
		{name: "new volume", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data")}},
		{name: "shadows a configMap", policy: extv1beta1.InjectionPolicyOverrides, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("config")},
			want: "would replace the configMap volume config of SandboxTemplate tmpl"},
		{name: "shadows an emptyDir", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("scratch")},
			want: "would replace the emptyDir volume scratch"},
		{name: "replaces a PVC volume", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("shared")}},
		{name: "overrides the template's own", policy: extv1beta1.InjectionPolicyOverrides, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("workspace")}},
		{name: "dataSource on a new volume", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", snapshot("someone-elses"))},
			want: "sets spec.dataSource"},
		{name: "dataSourceRef", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", func(s *corev1.PersistentVolumeClaimSpec) {
			s.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "other"}
		})}, want: "sets spec.dataSourceRef"},
		{name: "volumeName", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", func(s *corev1.PersistentVolumeClaimSpec) {
			s.VolumeName = "pv-of-someone-else"
		})}, want: "sets spec.volumeName"},
		{name: "selector", policy: extv1beta1.InjectionPolicyAllowed, vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", func(s *corev1.PersistentVolumeClaimSpec) {
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "alice"}}
		})}, want: "sets spec.selector"},
		{name: "keeps the template's dataSource", policy: extv1beta1.InjectionPolicyOverrides,
			vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("workspace", snapshot("golden-image"))}},
		{name: "changes the template's dataSource", policy: extv1beta1.InjectionPolicyOverrides,
			vcts: []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("workspace", snapshot("someone-elses"))}, want: "may only keep the value SandboxTemplate tmpl gives"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := guardClaim(func(c *extv1beta1.SandboxClaim) { c.Spec.VolumeClaimTemplates = tc.vcts })
			tmpl := guardTemplate(tc.policy)
			rej := ValidateClaim(c, tmpl)
			_, err := ClaimSandbox(ClaimInputs{Claim: c, Template: tmpl})
			if tc.want == "" {
				if rej != nil || err != nil {
					t.Fatalf("refused: %v / %v", rej, err)
				}
				return
			}
			if rej == nil || rej.Reason != extv1beta1.ReasonVolumeClaimTemplatesError || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("rejection %+v, want VolumeClaimTemplatesError containing %q", rej, tc.want)
			}
			if err == nil || err.Error() != rej.Message {
				t.Errorf("ClaimSandbox: %v, want the same refusal", err)
			}
		})
	}
}

// The Pod of a Sandbox gets no service-account token unless the pod
// template asks for one; the Sandbox itself is left as written.
func TestPodHasNoTokenByDefault(t *testing.T) {
	cases := []struct {
		name string
		set  *bool
		want bool
	}{
		{"unset", nil, false},
		{"false", ptr.To(false), false},
		{"true", ptr.To(true), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "ns", UID: "u"}}
			sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
			sb.Spec.PodTemplate.Spec.AutomountServiceAccountToken = tc.set
			d, err := Sandbox(SandboxInputs{Sandbox: sb})
			if err != nil {
				t.Fatal(err)
			}
			got := d.Pod.Spec.AutomountServiceAccountToken
			if got == nil || *got != tc.want {
				t.Errorf("pod automountServiceAccountToken = %v, want %v", got, tc.want)
			}
			if (sb.Spec.PodTemplate.Spec.AutomountServiceAccountToken == nil) != (tc.set == nil) {
				t.Error("render changed the Sandbox's pod template")
			}
		})
	}
}
