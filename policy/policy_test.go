package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func loadBundles(t testing.TB, names ...string) *Set {
	t.Helper()
	var srcs []Source
	for _, n := range names {
		src, err := Bundle(n)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	s, err := Load(srcs...)
	if err != nil {
		t.Fatalf("loading bundles %v: %v", names, err)
	}
	return s
}

// sandboxPod is a Pod as render makes it: the sandbox label, gVisor, no
// token, nothing privileged.
func sandboxPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "default", Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "0badc0de"}},
		Spec: corev1.PodSpec{
			RuntimeClassName:             ptr.To("gvisor"),
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{{
				Name: "agent", Image: "python:3.13",
				Ports:           []corev1.ContainerPort{{ContainerPort: 8888}},
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func dropAll() *corev1.Capabilities { return &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}} }

func TestBuiltInRules(t *testing.T) {
	all := loadBundles(t, BundleRuntimeIsolation, BundleBaseline, BundleRestricted)
	yes := true
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		policy string // "" means allowed
		rule   int
		want   string // part of the message
	}{
		{name: "compliant", mutate: func(*corev1.Pod) {}},
		{name: "kata allowed", mutate: func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("kata-qemu") }},
		{name: "no runtime class", mutate: func(p *corev1.Pod) { p.Spec.RuntimeClassName = nil },
			policy: "agent-sandbox-runtime-isolation", rule: 0, want: "runtimeClassName (unset) is not allowed"},
		{name: "runc", mutate: func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("runc") },
			policy: "agent-sandbox-runtime-isolation", rule: 0, want: "to one of: gvisor, kata, kata-qemu, kata-clh, kata-fc"},
		{name: "privileged container", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = &yes },
			policy: "agent-sandbox-baseline", rule: 0, want: "privileged containers are not allowed: agent"},
		{name: "privileged init container", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: &yes, Capabilities: dropAll()}}}
		}, policy: "agent-sandbox-baseline", rule: 0, want: "setup"},
		{name: "privileged ephemeral container", mutate: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: &yes, Capabilities: dropAll()}}}}
		}, policy: "agent-sandbox-baseline", rule: 0, want: "debug"},
		{name: "hostNetwork", mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			policy: "agent-sandbox-baseline", rule: 1, want: "hostNetwork"},
		{name: "hostPID", mutate: func(p *corev1.Pod) { p.Spec.HostPID = true },
			policy: "agent-sandbox-baseline", rule: 1},
		{name: "hostIPC", mutate: func(p *corev1.Pod) { p.Spec.HostIPC = true },
			policy: "agent-sandbox-baseline", rule: 1},
		{name: "hostPath volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, policy: "agent-sandbox-baseline", rule: 2, want: "hostPath volumes are not allowed: root"},
		{name: "hostPort", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 80 },
			policy: "agent-sandbox-baseline", rule: 3},
		{name: "added capability", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, policy: "agent-sandbox-baseline", rule: 4, want: "adding capabilities"},
		{name: "sysctls", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_forward", Value: "1"}}
		}, policy: "agent-sandbox-baseline", rule: 5},
		{name: "procMount Unmasked", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}, policy: "agent-sandbox-baseline", rule: 6},
		{name: "procMount Default allowed", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.DefaultProcMount)
		}},
		{name: "projected token", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
		}, policy: "agent-sandbox-baseline", rule: 7},
		{name: "automount true", mutate: func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = &yes },
			policy: "agent-sandbox-baseline", rule: 8},
		{name: "seccomp Unconfined on the pod", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, policy: "agent-sandbox-baseline", rule: 9, want: "Unconfined is not allowed): pod"},
		{name: "seccomp Unconfined on an init container", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "x", SecurityContext: &corev1.SecurityContext{
				Capabilities: dropAll(), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}}}
		}, policy: "agent-sandbox-baseline", rule: 9, want: "): setup"},
		{name: "seccomp RuntimeDefault and Localhost allowed", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			p.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}
		}},
		{name: "seccomp annotation unconfined", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.seccomp.security.alpha.kubernetes.io/agent": "unconfined"}
		}, policy: "agent-sandbox-baseline", rule: 10, want: "container.seccomp.security.alpha.kubernetes.io/agent"},
		{name: "seccomp pod annotation unconfined", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
		}, policy: "agent-sandbox-baseline", rule: 10, want: "seccomp.security.alpha.kubernetes.io/pod"},
		{name: "seccomp annotations allowed", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
				"container.seccomp.security.alpha.kubernetes.io/agent": "localhost/p.json", "other": "unconfined"}
		}},
		{name: "AppArmor Unconfined on a container", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, policy: "agent-sandbox-baseline", rule: 11, want: "): agent"},
		{name: "AppArmor Unconfined on the pod", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, policy: "agent-sandbox-baseline", rule: 11, want: "): pod"},
		{name: "AppArmor annotation unconfined", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/agent": "unconfined"}
		}, policy: "agent-sandbox-baseline", rule: 12, want: "runtime/default or localhost/* profiles: container.apparmor.security.beta.kubernetes.io/agent"},
		{name: "AppArmor allowed", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/agent": "localhost/sandbox"}
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		}},
		{name: "SELinux type spc_t", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, policy: "agent-sandbox-baseline", rule: 13, want: "container_engine_t: agent"},
		{name: "SELinux allowed type and level", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "container_kvm_t", Level: "s0:c1,c2"}
		}},
		{name: "SELinux user", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{User: "system_u"}
		}, policy: "agent-sandbox-baseline", rule: 14, want: "must not be set: pod"},
		{name: "SELinux role", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Role: "sysadm_r"}
		}, policy: "agent-sandbox-baseline", rule: 14, want: "agent"},
		{name: "nfs volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.0.0.1", Path: "/"}}}}
		}, policy: "agent-sandbox-baseline", rule: 15, want: "use a PersistentVolumeClaim: share"},
		{name: "iscsi, cephfs and gitRepo volumes", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "disk", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "i"}}},
				{Name: "fs", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}}}},
				{Name: "repo", VolumeSource: corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "r"}}},
			}
		}, policy: "agent-sandbox-baseline", rule: 15, want: "disk, fs, repo"},
		{name: "ordinary volumes allowed", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}},
				{Name: "e", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				{Name: "f", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "g", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "r"}}},
				{Name: "h", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}}}}},
			}
		}},
		{name: "inline CSI volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "secrets-store", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}}}
		}, policy: "agent-sandbox-baseline", rule: 16, want: "inline CSI volumes are not allowed"},
		{name: "projected pod certificate", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519"}}}}}}}
		}, policy: "agent-sandbox-baseline", rule: 17, want: "cert"},
		{name: "Windows HostProcess", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: &yes}
		}, policy: "agent-sandbox-baseline", rule: 18, want: "HostProcess containers are not allowed: pod"},
		{name: "probe with a host", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}}}
		}, policy: "agent-sandbox-baseline", rule: 19, want: "agent"},
		{name: "lifecycle hook with a host", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(22)}}}
		}, policy: "agent-sandbox-baseline", rule: 19, want: "agent"},
		{name: "probes without a host allowed", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8888)}}}
			p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8888)}}}
		}},
		{name: "token Secret volume", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "default-token-x7k2q"}}}}
		}, policy: "agent-sandbox-baseline", rule: 21, want: "ServiceAccount token Secrets (named <account>-token-<suffix>) must not be mounted: sandboxes get no Kubernetes API credentials: volume creds"},
		{name: "token Secret projected", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "deployer-token-b2c4d"}}}}}}}}
		}, policy: "agent-sandbox-baseline", rule: 21, want: "volume all"},
		{name: "token Secret in env", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "builder-token-zz99w"}, Key: "token"}}}}
		}, policy: "agent-sandbox-baseline", rule: 21, want: "env of agent"},
		{name: "token Secret in envFrom of an init container", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "x", SecurityContext: &corev1.SecurityContext{Capabilities: dropAll()},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "default-token-q5rts"}}}}}}
		}, policy: "agent-sandbox-baseline", rule: 21, want: "env of setup"},
		{name: "Secrets not named like token Secrets allowed", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "api-token"}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "my-token-abcde"}}}, // vowels: never generated
				{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "default-token-x7k2q-copy"}}},
			}
		}},
		{name: "root", mutate: func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsNonRoot = nil },
			policy: "agent-sandbox-restricted", rule: 0},
		{name: "container non-root overrides", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsNonRoot = nil
			p.Spec.Containers[0].SecurityContext.RunAsNonRoot = &yes
		}},
		{name: "capabilities kept", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Capabilities = nil },
			policy: "agent-sandbox-restricted", rule: 1},
		{name: "no limits", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} },
			policy: "agent-sandbox-restricted", rule: 2, want: "missing on: agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := all.CheckAll(context.Background(), sandboxPod(tc.mutate))
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy == "" {
				if len(ds) > 0 {
					t.Fatalf("denied: %v", ds)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("got %d decisions, want 1: %v", len(ds), ds)
			}
			d := ds[0]
			if d.Policy != tc.policy || d.Rule != tc.rule || d.Action != Deny || d.Object != "Pod default/box" {
				t.Errorf("decision %+v, want policy %s rule %d Deny", d, tc.policy, tc.rule)
			}
			if !strings.Contains(d.Message, tc.want) {
				t.Errorf("message %q does not contain %q", d.Message, tc.want)
			}
		})
	}
}

func TestPodsOutsideSandboxesAreNotChecked(t *testing.T) {
	s := loadBundles(t, BundleRuntimeIsolation, BundleBaseline)
	p := sandboxPod(func(p *corev1.Pod) {
		p.Labels = nil
		p.Spec.HostNetwork = true
		p.Spec.RuntimeClassName = nil
	})
	if ds, _ := s.CheckAll(context.Background(), p); len(ds) != 0 {
		t.Errorf("a Pod without the sandbox label was checked: %v", ds)
	}
}

func TestLoadErrors(t *testing.T) {
	valid, _ := Bundle(BundleBaseline)
	cases := []struct {
		name, yaml, want string
	}{
		{"bad CEL", strings.Replace(string(valid.Data), "object.spec.hostNetwork) &&", "object.spec.hostNetwork) &&&", 1),
			"policy agent-sandbox-baseline: spec.validations[1]: line 1, column"},
		{"unknown field", strings.Replace(string(valid.Data), "failurePolicy: Fail", "failurePolicy: Fail\n  surprise: true", 1),
			`unknown field "surprise"`},
		{"audit annotations", strings.Replace(string(valid.Data), "failurePolicy: Fail", "failurePolicy: Fail\n  auditAnnotations:\n  - key: k\n    valueExpression: \"'v'\"", 1),
			"audit annotations are not supported"},
		{"namespace selector", strings.Replace(string(valid.Data), "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector:\n      matchLabels: {team: a}\n", 1),
			"namespaceSelector is not supported"},
		{"binding to nothing", strings.Replace(string(valid.Data), "policyName: agent-sandbox-baseline", "policyName: nope", 1),
			`names policy "nope", which is not defined`},
		{"bad action", strings.Replace(string(valid.Data), "validationActions: [Deny]", "validationActions: [Block]", 1),
			`validationAction "Block"`},
		{"yaml syntax", "apiVersion: v1\nkind: [", "document 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Source{Name: "test.yaml", Data: []byte(tc.yaml)})
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestMissingParamsDeny(t *testing.T) {
	src, _ := Bundle(BundleRuntimeIsolation)
	withoutParams := string(src.Data)[:strings.LastIndex(string(src.Data), "---")]
	s, err := Load(Source{Name: "x", Data: []byte(withoutParams)})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := s.CheckAll(context.Background(), sandboxPod())
	if len(ds) != 1 || !strings.Contains(ds[0].Message, "do not exist") {
		t.Errorf("decisions %v, want a denial for the missing params", ds)
	}
}

func TestWarnAndAudit(t *testing.T) {
	src, _ := Bundle(BundleBaseline)
	s, err := Load(Source{Name: "x", Data: []byte(strings.Replace(string(src.Data), "validationActions: [Deny]", "validationActions: [Warn, Audit]", 1))})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := s.CheckAll(context.Background(), sandboxPod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }))
	if len(ds) != 2 || ds[0].Action != Warn || ds[1].Action != Audit || len(Denied(ds)) != 0 {
		t.Errorf("decisions %v, want one Warn and one Audit", ds)
	}
}

// BenchmarkCheckRenderedPod is the policy check of a rendered sandbox Pod
// with every built-in bundle on.
// BenchmarkCheckRenderedPod judges a rendered sandbox Pod by the three
// bundles: evaluated (no memory) and remembered (a Pod alike but for its
// name, as the next Sandbox of a template renders it).
func BenchmarkCheckRenderedPod(b *testing.B) {
	for _, remember := range []bool{false, true} {
		b.Run(map[bool]string{false: "evaluated", true: "remembered"}[remember], func(b *testing.B) {
			s := loadBundles(b, BundleRuntimeIsolation, BundleBaseline, BundleRestricted)
			if !remember {
				s.memo = nil
			}
			ctx := context.Background()
			objs := make([]Object, 2)
			for i := range objs {
				o, err := ObjectOf(sandboxPod(func(p *corev1.Pod) { p.Name = fmt.Sprintf("box-%d", i) }))
				if err != nil {
					b.Fatal(err)
				}
				objs[i] = o
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if ds := s.Check(ctx, objs[i%2]); len(ds) != 0 {
					b.Fatal(ds)
				}
			}
		})
	}
}
