package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// What a claim may not do to the Sandbox it gets: a claim is written by
// whoever asks for a sandbox, the template by whoever decides how sandboxes
// are isolated. The rules here keep the first from overruling the second.

// runtimeKey is a family of label or annotation keys that a container
// runtime, the kubelet or an OCI hook reads when it starts a Pod.
type runtimeKey struct {
	// prefix the key starts with (compared case-insensitively).
	prefix string
	// why says who reads it and what it changes, naming the prefix.
	why string
}

// runtimeKeys are refused in a claim's additionalPodMetadata. More specific
// prefixes come first, so the message names the right reader.
var runtimeKeys = []runtimeKey{
	{"io.katacontainers.", "Kata Containers configures the sandbox VM from io.katacontainers. keys (hypervisor, kernel, devices, mounts)"},
	{"dev.gvisor.", "gVisor (runsc) configures the sandbox from dev.gvisor. keys (mounts, flags)"},
	{"io.kubernetes.cri-o.", "CRI-O reads io.kubernetes.cri-o. keys (devices, user namespaces, cgroups, shared memory)"},
	{"io.kubernetes.cri.", "containerd's CRI plugin keeps its container settings under io.kubernetes.cri."},
	{"io.kubernetes.", "the kubelet and the container runtimes keep their own keys under io.kubernetes."},
	{"io.containerd.", "containerd reads io.containerd. keys"},
	{"io.containers.", "the OCI hooks of CRI-O and Podman read io.containers. keys (syscall tracing writes to the node)"},
	{"run.oci.", "crun reads run.oci. keys (run.oci.handler switches the runtime)"},
	{"module.wasm.image/", "crun picks a WebAssembly handler from module.wasm.image/ keys"},
	{"org.systemd.property.", "runc and crun turn org.systemd.property. keys into properties of the container's systemd unit on the node"},
	{"org.criu.", "runc passes org.criu. keys to CRIU when a container is checkpointed or restored"},
	{"container.apparmor.security.beta.kubernetes.io/", "the kubelet picks containers' AppArmor profiles from container.apparmor.security.beta.kubernetes.io/ keys"},
	{"seccomp.security.alpha.kubernetes.io/", "seccomp.security.alpha.kubernetes.io/ keys pick the Pod's seccomp profile"},
	{"container.seccomp.security.alpha.kubernetes.io/", "container.seccomp.security.alpha.kubernetes.io/ keys pick a container's seccomp profile"},
	{"cdi.k8s.io/", "containerd and CRI-O inject the devices that cdi.k8s.io/ keys name into the containers"},
}

// networkKeys are refused in a claim's additionalPodMetadata on top of
// runtimeKeys: CNI plugins and service meshes read them to attach the Pod to
// other networks or to change how its traffic is intercepted, around the
// NetworkPolicy the Sandbox gets. A SandboxTemplate may set them: where a
// sandbox's network is, is the platform's decision.
var networkKeys = []runtimeKey{
	{"k8s.v1.cni.cncf.io/", "Multus attaches the Pod to the networks k8s.v1.cni.cncf.io/ keys name (k8s.v1.cni.cncf.io/networks), outside its NetworkPolicy"},
	{"v1.multus-cni.io/", "Multus replaces the Pod's default network with the one v1.multus-cni.io/ keys name"},
	{"traffic.sidecar.istio.io/", "Istio's sidecar leaves the ports and addresses traffic.sidecar.istio.io/ keys name outside the mesh and its policies"},
	{"sidecar.istio.io/", "Istio decides from sidecar.istio.io/ keys whether the Pod gets a sidecar proxy and what it runs"},
	{"cni.projectcalico.org/", "Calico assigns the addresses, pools and floating IPs cni.projectcalico.org/ keys name"},
}

// RuntimeKeyPrefixes are the key prefixes (lower case) that container
// runtimes, the kubelet or OCI hooks read when they start a Pod, and
// RuntimeKeyDomains the DNS domains whose keys CRI-O reads: what a claim
// may never set, and what the baseline policy bundle refuses on any
// sandbox Pod (a test keeps the bundle's CEL list equal to this one).
func RuntimeKeyPrefixes() (prefixes, domains []string) {
	for _, r := range runtimeKeys {
		prefixes = append(prefixes, r.prefix)
	}
	return prefixes, append([]string(nil), runtimeDomains...)
}

// runtimeDomains are DNS domains whose keys CRI-O reads (CPU isolation such
// as cpu-quota.crio.io, seccomp profiles pulled from images under
// seccomp-profile.kubernetes.cri-o.io/). A key is in a domain when the part
// before the slash (or the whole key) is the domain or a subdomain of it.
var runtimeDomains = []string{"crio.io", "cri-o.io"}

// runtimeKeyReason says why a claim may not set key, or "" when it may.
func runtimeKeyReason(key string) string {
	k := strings.ToLower(key)
	for _, r := range append(runtimeKeys[:len(runtimeKeys):len(runtimeKeys)], networkKeys...) {
		if strings.HasPrefix(k, r.prefix) {
			return r.why
		}
	}
	domain, _, _ := strings.Cut(k, "/")
	for _, d := range runtimeDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return fmt.Sprintf("CRI-O reads keys in the %s domain (CPU isolation, seccomp profiles)", d)
		}
	}
	return ""
}

// restrictedVCTFields are the fields of a claim's volume claim template that
// would attach existing data to the Sandbox (another PVC or a snapshot, a
// pre-bound PersistentVolume, volumes picked by label) instead of a new,
// empty volume.
var restrictedVCTFields = []struct {
	name string
	get  func(*corev1.PersistentVolumeClaimSpec) (value any, set bool)
}{
	{"dataSource", func(s *corev1.PersistentVolumeClaimSpec) (any, bool) { return s.DataSource, s.DataSource != nil }},
	{"dataSourceRef", func(s *corev1.PersistentVolumeClaimSpec) (any, bool) { return s.DataSourceRef, s.DataSourceRef != nil }},
	{"volumeName", func(s *corev1.PersistentVolumeClaimSpec) (any, bool) { return s.VolumeName, s.VolumeName != "" }},
	{"selector", func(s *corev1.PersistentVolumeClaimSpec) (any, bool) { return s.Selector, s.Selector != nil }},
}

// checkClaimVCT refuses a claim's volume claim template that replaces a
// template volume of another kind, or that sets a restricted field with a
// value the template's own volume claim template of that name does not
// have. volumes are the template's Pod volumes, base its volume claim
// templates. It returns a message, or "" when the template is fine.
func checkClaimVCT(v *sandboxv1beta1.PersistentVolumeClaimTemplate, volumes []corev1.Volume, base []sandboxv1beta1.PersistentVolumeClaimTemplate, template string) string {
	var own *sandboxv1beta1.PersistentVolumeClaimTemplate
	for i := range base {
		if base[i].Name == v.Name {
			own = &base[i]
		}
	}
	for _, vol := range volumes {
		// A template volume the template itself replaces with a PVC (own
		// != nil), or that is a PVC already, may be replaced by a PVC.
		if vol.Name != v.Name || vol.PersistentVolumeClaim != nil || own != nil {
			continue
		}
		return fmt.Sprintf("volume claim template %s would replace the %s volume %s of SandboxTemplate %s with a PersistentVolumeClaim; a claim may only add volumes or replace the template's persistent ones: rename it",
			v.Name, volumeKind(vol), vol.Name, template)
	}
	for _, f := range restrictedVCTFields {
		got, set := f.get(&v.Spec)
		if !set {
			continue
		}
		if own != nil {
			if want, _ := f.get(&own.Spec); apiequality.Semantic.DeepEqual(want, got) {
				continue
			}
		}
		return fmt.Sprintf("volume claim template %s sets spec.%s, which would attach existing data (another claim, a snapshot or a pre-bound volume) to the Sandbox; a claim may only keep the value SandboxTemplate %s gives a volume claim template of the same name: remove it, or set it in the template",
			v.Name, f.name, template)
	}
	return ""
}

// volumeKind names the source of a Pod volume by its field (emptyDir,
// configMap, ...).
func volumeKind(v corev1.Volume) string {
	b, err := json.Marshal(v.VolumeSource)
	if err != nil {
		return "other"
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil || len(fields) == 0 {
		return "other"
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, "+")
}
