package v1beta1

// Label and annotation keys. They are part of the public API: users select on
// them and other tools read them, so their spelling never changes.
const (
	// ReservedPrefix is the key prefix reserved for the controller. Template
	// labels and annotations under it are not propagated to Pods.
	ReservedPrefix = GroupName + "/"
	// ExtensionsReservedPrefix is the second reserved key prefix, for the
	// extensions API group.
	ExtensionsReservedPrefix = "extensions." + GroupName + "/"
	// ConversionAnnotationPrefix holds, on stored objects, the values of fields
	// that another API version cannot represent, so round trips are lossless.
	ConversionAnnotationPrefix = "api." + GroupName + "/"

	// LabelSandboxNameHash is set on a Sandbox's Pod, Service and PVCs: the
	// FNV-1a 32-bit hash of the Sandbox name as 8 lowercase hex digits. The
	// Service selects the Pod with it.
	LabelSandboxNameHash = GroupName + "/sandbox-name-hash"
	// LabelSandboxUID is set on a Sandbox's Pod, Service and PVCs: the
	// Sandbox's UID. Unlike the name hash it cannot collide, so every
	// selector the controller owns of one Sandbox's Pod (the Service's)
	// requires it next to the name hash. The UID survives
	// a warm pool member's adoption by a claim.
	LabelSandboxUID = GroupName + "/sandbox-uid"
	// LabelNetworkPolicy, on a Sandbox's Pod, names the default
	// NetworkPolicy it falls under: NetworkPolicyDefaultDeny for a Sandbox
	// whose policy the controller manages and no template governs. The
	// namespace's default-deny NetworkPolicy selects on it. The controller
	// sets and removes it; a pod template cannot (reserved prefix).
	LabelNetworkPolicy = GroupName + "/network-policy"
	// NetworkPolicyDefaultDeny is LabelNetworkPolicy's value.
	NetworkPolicyDefaultDeny = "default-deny"
	// LabelAdoptable, set to "true" on an unowned Pod, Service or PVC, allows a
	// Sandbox of the matching name to adopt it.
	LabelAdoptable = GroupName + "/adoptable"
	// LabelWarmPoolSandbox marks a Sandbox as a member of a warm pool; its value
	// is the hash of the pool's name.
	LabelWarmPoolSandbox = GroupName + "/warm-pool-sandbox"
	// LabelSandboxTemplateRefHash is the hash of the name of the
	// SandboxTemplate a Sandbox or Pod was created from; the template's
	// NetworkPolicy selects Pods with it.
	LabelSandboxTemplateRefHash = GroupName + "/sandbox-template-ref-hash"
	// LabelSandboxTemplateRefSHA256 is set on the Pod of a Sandbox a claim
	// or a warm pool made from a SandboxTemplate: the first 128 bits of
	// the SHA-256 of the template's name (agents.x-k8s.io/sandbox-template-ref),
	// as 32 lowercase hex digits. The template-ref hash is 32 bits and
	// collides; the template's NetworkPolicy selects on this label too, so
	// another template's Pods never fall under it.
	LabelSandboxTemplateRefSHA256 = GroupName + "/sandbox-template-ref-sha256"
	// LabelSandboxTemplateHash is the hash of the template blueprint a warm pool
	// member was rendered from; members with an older hash are stale.
	LabelSandboxTemplateHash = GroupName + "/sandbox-template-hash"
	// LabelLaunchType says how a claimed Sandbox started: LaunchTypeCold or
	// LaunchTypeWarm.
	LabelLaunchType = GroupName + "/launch-type"
	// LabelCreatedBy names the component that created an object.
	LabelCreatedBy = GroupName + "/created-by"
	// LabelClaimUID is the UID of the SandboxClaim a Sandbox (and its Pod)
	// belongs to.
	LabelClaimUID = GroupName + "/claim-uid"

	// AnnotationNetworkPolicyManagement, on a Sandbox, is the switch of
	// its default-deny NetworkPolicy, with the values and meaning of a
	// SandboxTemplate's spec.networkPolicyManagement: Managed (the
	// default: its Pod is labelled LabelNetworkPolicy=NetworkPolicyDefaultDeny
	// and falls under the namespace's default-deny NetworkPolicy, which the
	// controller keeps) or Unmanaged (the Pod is not labelled so: the user
	// manages the Pod's policies). Any other value counts as Managed.
	// Sandboxes made from a template (by a claim or a warm pool) are
	// governed by the template's NetworkPolicy instead.
	AnnotationNetworkPolicyManagement = GroupName + "/network-policy-management"
	// AnnotationTraceContext, on a SandboxClaim or a Sandbox, carries the W3C
	// trace context (a JSON object of propagation headers, e.g.
	// {"traceparent":"00-...-...-01"}) of the trace that asked for it, so the
	// controller's work on it joins that trace (upstream's name).
	AnnotationTraceContext = "opentelemetry.io/trace-context"
	// AnnotationPodName, on a Sandbox, is the name of the Pod it created or adopted.
	AnnotationPodName = GroupName + "/pod-name"
	// AnnotationPropagatedLabels, on a Pod, lists (sorted, comma-separated)
	// the pod template labels the controller put there.
	AnnotationPropagatedLabels = GroupName + "/propagated-labels"
	// AnnotationPropagatedAnnotations, on a Pod, lists (sorted,
	// comma-separated) the pod template annotations the controller put there.
	AnnotationPropagatedAnnotations = GroupName + "/propagated-annotations"
	// AnnotationSandboxTemplateRef, on a Sandbox, is the name of the
	// SandboxTemplate it was created from.
	AnnotationSandboxTemplateRef = GroupName + "/sandbox-template-ref"
)

// Values of LabelLaunchType.
const (
	// LaunchTypeCold: the Sandbox was created for the claim that owns it.
	LaunchTypeCold = "cold"
	// LaunchTypeWarm: the Sandbox was taken, already running, from a warm pool.
	LaunchTypeWarm = "warm"
)

// AdoptableValue is the value of LabelAdoptable that allows adoption.
const AdoptableValue = "true"
