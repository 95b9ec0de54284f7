package render

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// NameHash is the value of the sandbox-name-hash label for a name: FNV-1a
// 32-bit, as 8 lowercase hex digits.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}

// SandboxInputs is everything Sandbox renders from. Observations of the
// cluster come in here; render never reads them itself.
type SandboxInputs struct {
	// Sandbox is the object being rendered. Required, with name, namespace and UID.
	Sandbox *sandboxv1beta1.Sandbox
	// ServiceExists reports that a Service owned by this Sandbox exists; with
	// spec.service unset it is kept (rendered) rather than created.
	ServiceExists bool
	// PodName is the name of the Pod to create or keep (an adopted Pod may be
	// named differently from the Sandbox); empty means the Sandbox's name.
	PodName string
	// Expired reports that shutdownTime has passed: nothing should run, the
	// Service goes, and PVCs are kept but not created.
	Expired bool
	// Defaults fill what the pod template leaves unset, in the Pod only.
	Defaults Defaults
	// ControllerNamespace is where the controller and the sandbox router
	// run: the Sandbox's NetworkPolicy admits ingress only from routers
	// there. Empty renders no NetworkPolicy (a rendering that does not
	// know it: the webhook's, the CLI's); the controller always sets it.
	ControllerNamespace string
	// LegacyServiceSelector reports that the Pod kept does not carry the
	// sandbox-uid label yet (made before the label existed): the Service
	// keeps selecting by name hash alone until the Pod is labelled, so an
	// upgrade never drops a running Pod from its Service.
	LegacyServiceSelector bool
	// TemplateGone reports a Sandbox made from a template (MadeFromTemplate)
	// whose template is gone or that names none: no template policy
	// governs its Pod any more, so it falls under the namespace's
	// default-deny NetworkPolicy.
	TemplateGone bool
	// NamespaceUID is the UID of the Sandbox's Namespace, the owner of its
	// default-deny NetworkPolicy; empty renders that policy without an
	// owner (a rendering that does not know it).
	NamespaceUID types.UID
}

// Defaults are the controller-wide settings a Sandbox's Pod gets where its
// pod template leaves a field unset. They exist only in the rendered Pod:
// the Sandbox (or the template it was made from) keeps what its author
// wrote, so a GitOps tool never sees a difference to undo.
type Defaults struct {
	// RuntimeClassName, when not empty, is the runtime class of Pods whose
	// template names none (the cluster's isolating RuntimeClass).
	RuntimeClassName string
}

// DefaultsSource gives the Defaults in force when it is asked. The
// controller's follows the cluster's RuntimeClasses; a Defaults value is a
// source that never changes. Render never asks one itself: its callers
// pass the value in SandboxInputs.
type DefaultsSource interface {
	Current() Defaults
}

// Current returns d: a Defaults value is its own, fixed, source.
func (d Defaults) Current() Defaults { return d }

// CurrentDefaults asks s for the defaults in force; nil gives none.
func CurrentDefaults(s DefaultsSource) Defaults {
	if s == nil {
		return Defaults{}
	}
	return s.Current()
}

// SandboxDesired is what a Sandbox should own.
type SandboxDesired struct {
	// Pod is nil when no Pod should run (suspended or expired).
	Pod *corev1ac.PodApplyConfiguration
	// Service is nil when no Service should exist or be kept.
	Service *corev1ac.ServiceApplyConfiguration
	// DeleteService is set when spec.service is false or the Sandbox expired:
	// a Service we own must go.
	DeleteService bool
	// PVCs, one per volume claim template, in template order.
	PVCs []*corev1ac.PersistentVolumeClaimApplyConfiguration
	// NetworkPolicy is the namespace's default-deny NetworkPolicy, which
	// the Pod falls under (labelled agents.x-k8s.io/network-policy); nil
	// when it does not (made from a template, Unmanaged, expired, or no
	// ControllerNamespace).
	NetworkPolicy *networkingv1ac.NetworkPolicyApplyConfiguration
	// DeleteNetworkPolicy is set when the Sandbox wants no default-deny
	// policy (Unmanaged, made from a template): a NetworkPolicy of its own
	// from an earlier release must go.
	DeleteNetworkPolicy bool
}

// Sandbox renders the Pod, headless Service, PVCs and NetworkPolicy of a
// Sandbox.
func Sandbox(in SandboxInputs) (SandboxDesired, error) {
	sb := in.Sandbox
	if sb == nil || sb.Name == "" || sb.Namespace == "" || sb.UID == "" {
		return SandboxDesired{}, fmt.Errorf("render: sandbox needs a name, namespace and uid")
	}
	var out SandboxDesired
	if in.Expired {
		out.DeleteService = true
		return out, nil
	}
	hash := NameHash(sb.Name)
	owner := controllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))

	wantService := sb.Spec.Service != nil && *sb.Spec.Service
	keepService := sb.Spec.Service == nil && in.ServiceExists
	out.DeleteService = sb.Spec.Service != nil && !*sb.Spec.Service
	if wantService {
		// Refuse before anything is created, with the fix in the message,
		// rather than create the Pod and fail on the Service.
		if errs := validation.IsDNS1035Label(sb.Name); len(errs) > 0 {
			return SandboxDesired{}, fmt.Errorf("spec.service: the headless Service is named after the Sandbox, and %q is not a valid Service name (%s): use a Sandbox name of at most 63 lowercase letters, digits and '-' that starts with a letter, or set spec.service to false",
				sb.Name, strings.Join(errs, "; "))
		}
	}
	if wantService || keepService {
		out.Service = service(sb, hash, owner, in.LegacyServiceSelector)
	}
	defaultDeny := DefaultDeny(sb, in.TemplateGone)
	switch {
	case !defaultDeny:
		out.DeleteNetworkPolicy = true
	case in.ControllerNamespace != "":
		out.NetworkPolicy = NamespaceNetworkPolicy(sb.Namespace, in.NamespaceUID, in.ControllerNamespace)
	}

	for i := range sb.Spec.VolumeClaimTemplates {
		p, err := pvc(sb, &sb.Spec.VolumeClaimTemplates[i], hash, owner)
		if err != nil {
			return SandboxDesired{}, err
		}
		out.PVCs = append(out.PVCs, p)
	}

	if !WantsPod(sb, in.Expired) {
		return out, nil
	}
	pod, err := pod(sb, in.PodName, hash, owner, out.Service != nil, defaultDeny, in.Defaults)
	if err != nil {
		return SandboxDesired{}, err
	}
	out.Pod = pod
	return out, nil
}

// WantsPod reports whether a Sandbox should have a Pod: it is neither
// expired nor suspended. When it should not, the plan needs nothing of the
// Pod it has but its identity (to delete it).
func WantsPod(sb *sandboxv1beta1.Sandbox, expired bool) bool {
	return !expired && sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended
}

// PodName returns the name of a Sandbox's Pod: the pod-name annotation when
// set (an adopted Pod), otherwise the Sandbox's name.
func PodName(sb *sandboxv1beta1.Sandbox) string {
	if n := sb.Annotations[sandboxv1beta1.AnnotationPodName]; n != "" {
		return n
	}
	return sb.Name
}

// PodSpec renders the spec of a Sandbox's Pod: the template's spec with PVC
// volumes in place of same-named template volumes, hostname/subdomain set
// when the template leaves them empty, no service-account token unless
// the template asks for one (automountServiceAccountToken: true), and the
// default runtime class when the template names none. The Sandbox itself
// is never changed.
func PodSpec(sb *sandboxv1beta1.Sandbox, withService bool, d Defaults) (*corev1ac.PodSpecApplyConfiguration, error) {
	spec := sb.Spec.PodTemplate.Spec.DeepCopy()
	for _, t := range sb.Spec.VolumeClaimTemplates {
		vol := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(t.Name, sb.Name)},
		}}
		replaced := false
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == t.Name {
				spec.Volumes[i] = vol
				replaced = true
			}
		}
		if !replaced {
			spec.Volumes = append(spec.Volumes, vol)
		}
	}
	if spec.Hostname == "" && len(validation.IsDNS1123Label(sb.Name)) == 0 {
		spec.Hostname = sb.Name
	}
	if spec.Subdomain == "" && withService {
		spec.Subdomain = sb.Name
	}
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	if spec.RuntimeClassName == nil && d.RuntimeClassName != "" {
		spec.RuntimeClassName = ptr.To(d.RuntimeClassName)
	}
	ac := &corev1ac.PodSpecApplyConfiguration{}
	if err := convert.JSON(spec, ac); err != nil {
		return nil, fmt.Errorf("render: pod spec: %w", err)
	}
	return ac, nil
}

func pod(sb *sandboxv1beta1.Sandbox, name, hash string, owner *metav1ac.OwnerReferenceApplyConfiguration, withService, defaultDeny bool, d Defaults) (*corev1ac.PodApplyConfiguration, error) {
	if name == "" {
		name = PodName(sb)
	}
	spec, err := PodSpec(sb, withService, d)
	if err != nil {
		return nil, err
	}
	labels := propagated(sb.Spec.PodTemplate.ObjectMeta.Labels)
	annotations := propagated(sb.Spec.PodTemplate.ObjectMeta.Annotations)
	// As upstream, the Pod lists the template keys the controller manages.
	labelKeys, annotationKeys := joinedKeys(labels), joinedKeys(annotations)
	if labelKeys != "" {
		annotations[sandboxv1beta1.AnnotationPropagatedLabels] = labelKeys
	}
	if annotationKeys != "" {
		annotations[sandboxv1beta1.AnnotationPropagatedAnnotations] = annotationKeys
	}
	labels[sandboxv1beta1.LabelSandboxNameHash] = hash
	labels[sandboxv1beta1.LabelSandboxUID] = string(sb.UID)
	if defaultDeny {
		labels[sandboxv1beta1.LabelNetworkPolicy] = sandboxv1beta1.NetworkPolicyDefaultDeny
	}
	if pool, claim := extv1beta1.PoolOf(sb), extv1beta1.ClaimOf(sb); pool != nil || claim != nil {
		for _, k := range PodIdentityLabels {
			if v := sb.Labels[k]; v != "" {
				labels[k] = v
			}
		}
		// The template's NetworkPolicy selects on its ref hash and its
		// collision-free key, both worked out from the template the
		// Sandbox names (the template a Sandbox outlives is looked up by
		// that name too, TemplateGone): a Sandbox's labels are its user's
		// to edit, and one relabelled by hand never takes its Pod out from
		// under every policy.
		if t := sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef]; t != "" {
			labels[sandboxv1beta1.LabelSandboxTemplateRefHash] = NameHash(t)
			labels[sandboxv1beta1.LabelSandboxTemplateRefSHA256] = TemplateRefSHA256(t)
		}
		// A warm pool member's Pod is marked as one until a claim takes
		// the Sandbox (as upstream; it costs one Pod write per warm claim,
		// off the claim's path to Ready).
		if v := sb.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; v != "" && pool != nil {
			labels[sandboxv1beta1.LabelWarmPoolSandbox] = v
		}
	}
	if v := sb.Labels[sandboxv1beta1.LabelCreatedBy]; v != "" {
		labels[sandboxv1beta1.LabelCreatedBy] = NormalizeCreatedBy(v)
	}
	p := corev1ac.Pod(name, sb.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(spec)
	if len(annotations) > 0 {
		p.WithAnnotations(annotations)
	}
	return p, nil
}

// NormalizeCreatedBy is the created-by label a Pod carries for its
// Sandbox's: one of go-client, python-client, controller, else unknown (as
// upstream, which keeps the label's values few).
func NormalizeCreatedBy(v string) string {
	switch v {
	case "go-client", "python-client", "controller":
		return v
	}
	return "unknown"
}

// joinedKeys joins a map's keys, sorted, with commas.
func joinedKeys(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// PodIdentityLabels are the controller's labels a Sandbox controlled by a
// claim or a warm pool passes on to its Pod: the template it was made from,
// which the template's NetworkPolicy selects (worked out from the
// template's name when the Sandbox has its sandbox-template-ref
// annotation, whatever its label says). (Claim identity stays on the
// Sandbox: putting it on the Pod would cost a Pod write on every warm claim.)
var PodIdentityLabels = []string{sandboxv1beta1.LabelSandboxTemplateRefHash}

// propagated copies template metadata without the keys reserved for the
// controller. The result is never nil.
func propagated(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for k, v := range in {
		if IsReservedKey(k) {
			continue
		}
		out[k] = v
	}
	return out
}

// IsReservedKey reports whether a label or annotation key belongs to the
// controller (agents.x-k8s.io/ or extensions.agents.x-k8s.io/).
func IsReservedKey(key string) bool {
	return strings.HasPrefix(key, sandboxv1beta1.ReservedPrefix) || strings.HasPrefix(key, sandboxv1beta1.ExtensionsReservedPrefix)
}

// PVCName is the name of the PVC made from a volume claim template.
func PVCName(template, sandbox string) string { return template + "-" + sandbox }

func pvc(sb *sandboxv1beta1.Sandbox, t *sandboxv1beta1.PersistentVolumeClaimTemplate, hash string, owner *metav1ac.OwnerReferenceApplyConfiguration) (*corev1ac.PersistentVolumeClaimApplyConfiguration, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("render: volumeClaimTemplates entry without metadata.name")
	}
	labels := make(map[string]string, len(t.Labels)+1)
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[sandboxv1beta1.LabelSandboxNameHash] = hash
	labels[sandboxv1beta1.LabelSandboxUID] = string(sb.UID)
	spec := &corev1ac.PersistentVolumeClaimSpecApplyConfiguration{}
	if err := convert.JSON(&t.Spec, spec); err != nil {
		return nil, fmt.Errorf("render: volume claim template %q: %w", t.Name, err)
	}
	name := PVCName(t.Name, sb.Name)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("spec.volumeClaimTemplates: the PersistentVolumeClaim %q (<template>-<sandbox>) is not a valid name (%s): shorten the template's or the Sandbox's name",
			name, strings.Join(errs, "; "))
	}
	p := corev1ac.PersistentVolumeClaim(name, sb.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(spec)
	if len(t.Annotations) > 0 {
		p.WithAnnotations(t.Annotations)
	}
	return p, nil
}
