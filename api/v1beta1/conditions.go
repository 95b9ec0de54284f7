package v1beta1

// Condition types of a Sandbox. Every condition carries observedGeneration.
const (
	// ConditionReady is True when the Sandbox's Pod is Running and Ready with
	// at least one IP and its Service exists if one is required.
	ConditionReady = "Ready"
	// ConditionSuspended is always present and tells where a suspend stands.
	ConditionSuspended = "Suspended"
	// ConditionPodScheduled mirrors the Pod's PodScheduled condition
	// (Unknown until the Pod reports one, or while the Pod cannot be
	// determined); it is absent while there is no owned Pod.
	ConditionPodScheduled = "PodScheduled"
	// ConditionFinished is True once the Pod has terminated (PodSucceeded or
	// PodFailed); absent otherwise, except that it is kept as it was once the
	// Sandbox expired.
	ConditionFinished = "Finished"
)

// Reasons of the Ready condition.
const (
	ReasonDependenciesReady    = "DependenciesReady"
	ReasonDependenciesNotReady = "DependenciesNotReady"
	ReasonSandboxSuspended     = "SandboxSuspended"
	ReasonPodSucceeded         = "PodSucceeded"
	ReasonPodFailed            = "PodFailed"
	ReasonSandboxExpired       = "SandboxExpired"
	ReasonMultiplePods         = "MultiplePods"
	ReasonReconcilerError      = "ReconcilerError"
	// ReasonPolicyDenied is our addition: a CEL policy denied the rendered
	// objects, and nothing was applied.
	ReasonPolicyDenied = "PolicyDenied"
)

// Reasons of the Suspended condition.
const (
	ReasonNotSuspended    = "NotSuspended"
	ReasonPodTerminated   = "PodTerminated"
	ReasonPodTerminating  = "PodTerminating"
	ReasonPodNotOwned     = "PodNotOwned"
	ReasonPodStateUnknown = "PodStateUnknown"
)

// Reasons of the PodScheduled condition when the Pod's own condition has
// none (or there is no Pod condition to mirror).
const (
	ReasonPodScheduled         = "PodScheduled"
	ReasonPodSchedulingUnknown = "PodSchedulingUnknown"
)

// Event reasons emitted for Sandboxes and claims.
const (
	EventSandboxAdopted     = "SandboxAdopted"
	EventPodTemplateDrift   = "PodTemplateDrift"
	EventSandboxProvisioned = "SandboxProvisioned"
	EventClaimExpired       = "ClaimExpired"
	// EventAdoptionRefused is the Warning event on a claim whose warm
	// adoption the API server refused; the claim cold-starts.
	EventAdoptionRefused = "AdoptionRefused"
	// EventWarmMemberPolicyDenied is the Warning event on a claim that
	// found a warm member whose running Pod the policies in force deny (it
	// was made before they were enforced, or changed since): the member is
	// not handed out but deleted, the pool replaces it, and the claim takes
	// another or starts its own.
	EventWarmMemberPolicyDenied = "WarmMemberPolicyDenied"
	EventWarmPoolNotProgressing = "WarmPoolNotProgressing"
	EventWarmPoolProgressing    = "WarmPoolProgressing"
)
