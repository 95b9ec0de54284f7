package render

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// service renders a Sandbox's headless Service: selecting its Pod by name
// hash and UID (SandboxSelector), or by name hash alone while legacy (the
// Pod kept has no sandbox-uid label yet).
func service(sb *sandboxv1beta1.Sandbox, hash string, owner *metav1ac.OwnerReferenceApplyConfiguration, legacy bool) *corev1ac.ServiceApplyConfiguration {
	selector := SandboxSelector(sb)
	if legacy {
		selector = map[string]string{sandboxv1beta1.LabelSandboxNameHash: hash}
	}
	spec := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(selector)
	for _, p := range ServicePorts(&sb.Spec.PodTemplate.Spec) {
		spec.WithPorts(corev1ac.ServicePort().WithName(p.Name).WithPort(p.Port).WithProtocol(p.Protocol))
	}
	return corev1ac.Service(sb.Name, sb.Namespace).
		WithLabels(SandboxSelector(sb)).
		WithOwnerReferences(owner).
		WithSpec(spec)
}

// ServicePort is one port of a Sandbox's headless Service.
type ServicePort struct {
	Name     string
	Port     int32
	Protocol corev1.Protocol
}

// ServicePorts lists the ports of the containers and native sidecars (init
// containers with restartPolicy Always), deduplicated by (port, protocol) in
// order of appearance. Unnamed ports, and ports whose name is already taken,
// are named p-<port>-<protocol>.
func ServicePorts(spec *corev1.PodSpec) []ServicePort {
	var containers []corev1.Container
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	containers = append(containers, spec.Containers...)

	type key struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[key]bool{}
	names := map[string]bool{}
	var out []ServicePort
	for _, c := range containers {
		for _, p := range c.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			k := key{p.ContainerPort, proto}
			if seen[k] {
				continue
			}
			seen[k] = true
			name := p.Name
			if name == "" || names[name] {
				name = "p-" + strconv.Itoa(int(p.ContainerPort)) + "-" + strings.ToLower(string(proto))
			}
			names[name] = true
			out = append(out, ServicePort{Name: name, Port: p.ContainerPort, Protocol: proto})
		}
	}
	return out
}
