package v1beta1

// Condition types of a SandboxClaim.
const (
	// ConditionReady is the claim's readiness: its own reasons below, or the
	// bound Sandbox's Ready condition forwarded.
	ConditionReady = "Ready"
	// ConditionFinished is mirrored from the bound Sandbox.
	ConditionFinished = "Finished"
)

// Reasons of a claim's Ready condition.
const (
	ReasonTemplateNotFound          = "TemplateNotFound"
	ReasonWarmPoolNotFound          = "WarmPoolNotFound"
	ReasonAdoptionConflict          = "AdoptionConflict"
	ReasonSandboxCreatePending      = "SandboxCreatePending"
	ReasonInvalidMetadata           = "InvalidMetadata"
	ReasonEnvVarsInjectionRejected  = "EnvVarsInjectionRejected"
	ReasonVolumeClaimTemplatesError = "VolumeClaimTemplatesError"
	ReasonClaimExpired              = "ClaimExpired"
	ReasonSandboxMissing            = "SandboxMissing"
	ReasonSandboxExpired            = "SandboxExpired"
	ReasonSandboxNotReady           = "SandboxNotReady"
	ReasonReconcilerError           = "ReconcilerError"
	ReasonPolicyDenied              = "PolicyDenied"
)

// AnnotationSandboxName, on a claim, is the name of the Sandbox bound to it.
const AnnotationSandboxName = "agents.x-k8s.io/sandbox-name"

// AnnotationControllerFirstObservedAt, on a claim, is when the controller
// first observed it (RFC 3339 with nanoseconds), written on the first
// reconcile as upstream's controller does.
const AnnotationControllerFirstObservedAt = "agents.x-k8s.io/controller-first-observed-at"

// AnnotationClientFirstRequestedAt, on a claim, is when the client that
// created it first asked for a sandbox (RFC 3339 with nanoseconds, UTC), as
// upstream's SDKs write it; it lets claim-to-ready latency include the time
// before the claim reached the API server.
const AnnotationClientFirstRequestedAt = "agents.x-k8s.io/client-first-requested-at"

// AnnotationClaimFirstReadyAt, on a claim, is when it was first reported
// Ready (RFC 3339 with nanoseconds, UTC), or ClaimFirstReadyUnknown when it
// was Ready before the controller observed it, as upstream writes it.
const AnnotationClaimFirstReadyAt = "agents.x-k8s.io/claim-first-ready-at"

// ClaimFirstReadyUnknown is the claim-first-ready-at value of a claim that
// was Ready before the controller observed it.
const ClaimFirstReadyUnknown = "unknown"

// Index keys for field indexers.
const (
	// IndexWarmPoolRef indexes claims by spec.warmPoolRef.name.
	IndexWarmPoolRef = ".spec.warmPoolRef.name"
	// IndexTemplateRef indexes warm pools by spec.sandboxTemplateRef.name.
	IndexTemplateRef = ".spec.sandboxTemplateRef.name"
)

// Warm pool condition types and reasons, our addition to the public API.
const (
	// ConditionProgressing is False when members do not become Ready: they
	// cannot be scheduled, or stay not Ready past the grace period.
	ConditionProgressing = "Progressing"

	ReasonWarmPoolReady        = "WarmPoolReady"
	ReasonWarmPoolNotReady     = "WarmPoolNotReady"
	ReasonMembersProgressing   = "MembersProgressing"
	ReasonMembersUnschedulable = "MembersUnschedulable"
	ReasonMembersNotReady      = "MembersNotReady"
)
