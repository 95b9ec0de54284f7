package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
)

// Label values used when a Sandbox has no launch type, template or owner.
const none = "none"

var (
	// CreationLatency is the time from a Sandbox's creation to its first Ready.
	CreationLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_creation_latency_ms",
		Help:    "Milliseconds from a Sandbox's creation to its first Ready condition.",
		Buckets: []float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000},
	}, []string{"namespace", "launch_type", "sandbox_template"})

	// Applies counts what the apply engine did, by kind and action
	// (created, configured, unchanged, deleted).
	Applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_apply_total",
		Help: "Objects handled by the server-side apply engine, by kind and action; unchanged ones cost no API request.",
	}, []string{"kind", "action"})

	// Saved counts API requests not sent because the cluster already held
	// what would have been applied.
	Saved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_apply_requests_saved_total",
		Help: "API requests not sent because the diff against what the controller owns found nothing to change.",
	}, []string{"kind"})
)

// Claim metrics, with the names and labels the public controller uses.
var (
	claimBuckets = []float64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000}

	// ClaimStartupLatency is the time from a claim's creation (as stamped by
	// the API server, to the second) to its first Ready.
	ClaimStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_claim_startup_latency_ms",
		Help:    "Milliseconds from a SandboxClaim's creation timestamp (second precision) to its first Ready condition.",
		Buckets: claimBuckets,
	}, []string{"launch_type", "sandbox_template"})

	// ClaimControllerStartupLatency is the time from the controller first
	// seeing a claim to reporting it Ready.
	ClaimControllerStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_claim_controller_startup_latency_ms",
		Help:    "Milliseconds from the controller first seeing a SandboxClaim to reporting it Ready.",
		Buckets: claimBuckets,
	}, []string{"launch_type", "sandbox_template"})

	// ClaimCreations counts Sandboxes bound to claims, by how.
	ClaimCreations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_claim_creation_total",
		Help: "Sandboxes bound to SandboxClaims: taken from a warm pool (warm) or created for the claim (cold).",
	}, []string{"launch_type", "sandbox_template"})
)

// Policy metrics.
var (
	// PolicyDecisions counts failed validations by policy, rule and action.
	PolicyDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_policy_decisions_total",
		Help: "Failed policy validations, by policy, rule index and action (Deny, Warn, Audit).",
	}, []string{"policy", "rule", "action"})
	// AdmissionDecisions counts failed validations at admission (the
	// webhook), by policy, rule and action: Audit-mode findings show here.
	AdmissionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_admission_policy_decisions_total",
		Help: "Failed policy validations at admission (the validating webhook), by policy, rule index and action (Deny, Warn, Audit).",
	}, []string{"policy", "rule", "action"})
	// PolicyLoadErrors counts policy reloads refused (the last good set stays).
	PolicyLoadErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agent_sandbox_policy_load_errors_total",
		Help: "Policy reloads that failed; the last good policy set stays in force.",
	})
	// PoliciesActive is 1 for each policy in force.
	PoliciesActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agent_sandbox_policies",
		Help: "The policies in force (value 1 each).",
	}, []string{"policy"})
)

// ReconcileRetries counts reconciles retried for an expected, passing
// reason (conflict, already_exists, unavailable, service_account) instead of being logged
// as errors.
var ReconcileRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "agent_sandbox_reconcile_retries_total",
	Help: "Reconciles retried with backoff for an expected, passing reason (conflict: another writer changed the object; already_exists: the cache was behind; unavailable: the API server was away; service_account: a Pod's ServiceAccount does not exist yet), by controller and reason.",
}, []string{"controller", "reason"})

// IdleSuspends counts Sandboxes suspended for having had no traffic for
// their idle timeout (the agents.x-k8s.io/idle-timeout annotation).
var IdleSuspends = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "agent_sandbox_idle_suspends_total",
	Help: "Sandboxes suspended by the controller after their idle timeout passed without traffic.",
})

// Latencies of the pure steps of a reconcile.
var (
	// RenderSeconds is how long rendering an object's desired children took.
	RenderSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_render_seconds",
		Help:    "Time to render the desired children of an object, by kind.",
		Buckets: []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 1e-2},
	}, []string{"kind"})
	// PolicySeconds is how long a policy check of an object and what it
	// renders took.
	PolicySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agent_sandbox_policy_check_seconds",
		Help:    "Time to check an object and its rendered children against the policies, by kind.",
		Buckets: []float64{1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2},
	}, []string{"kind"})
)

// Bounds of the labels that carry user input (see labels.go).
var (
	namespaceLabel      = newBoundedLabel(maxNamespaces)
	templateLabel       = newBoundedLabel(maxTemplates)
	policyLabel         = newBoundedLabel(maxPolicies)
	ruleLabel           = newBoundedLabel(maxRules)
	activePoliciesLabel = newBoundedLabel(maxPolicies)
)

// PolicyLoaded records the policies now in force.
func PolicyLoaded(names []string) {
	PoliciesActive.Reset()
	activePoliciesLabel.reset()
	for _, n := range names {
		PoliciesActive.WithLabelValues(activePoliciesLabel.value(n)).Set(1)
	}
}

func init() {
	crmetrics.Registry.MustRegister(CreationLatency, Applies, Saved, ClaimStartupLatency, ClaimControllerStartupLatency, ClaimCreations,
		PolicyDecisions, AdmissionDecisions, PolicyLoadErrors, PoliciesActive, RenderSeconds, PolicySeconds, ReconcileRetries, IdleSuspends, Watches)
}

// ObserveClaimReady records a claim's first Ready: at is now, seen is when
// the controller first saw the claim.
func ObserveClaimReady(created, seen, at time.Time, launchType, template string) {
	launchType, template = launchTypeValue(launchType), templateLabel.value(orNone(template))
	ClaimStartupLatency.WithLabelValues(launchType, template).Observe(float64(at.Sub(created).Milliseconds()))
	ClaimControllerStartupLatency.WithLabelValues(launchType, template).Observe(float64(at.Sub(seen).Milliseconds()))
}

// ObserveClaimCreation counts a Sandbox bound to a claim.
func ObserveClaimCreation(launchType, template string) {
	ClaimCreations.WithLabelValues(launchTypeValue(launchType), templateLabel.value(orNone(template))).Inc()
}

// launchTypeValue is a launch type as a label: cold, warm, none or other.
func launchTypeValue(v string) string {
	if v == "" {
		return none
	}
	return knownOr(v, sandboxv1beta1.LaunchTypeCold, sandboxv1beta1.LaunchTypeWarm, none)
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// ObserveChange records one outcome of the apply engine.
func ObserveChange(c ssa.Change) {
	Applies.WithLabelValues(c.Kind, string(c.Action)).Inc()
	if c.Action == ssa.Unchanged {
		Saved.WithLabelValues(c.Kind).Inc()
	}
}

// ObserveReady records a Sandbox's first Ready at a time.
func ObserveReady(sb *sandboxv1beta1.Sandbox, at time.Time) {
	ms := float64(at.Sub(sb.CreationTimestamp.Time).Milliseconds())
	CreationLatency.WithLabelValues(namespaceLabel.value(sb.Namespace), launchType(sb), templateLabel.value(template(sb))).Observe(ms)
}

func launchType(sb *sandboxv1beta1.Sandbox) string {
	return launchTypeValue(sb.Labels[sandboxv1beta1.LabelLaunchType])
}

func template(sb *sandboxv1beta1.Sandbox) string {
	if v := sb.Annotations[sandboxv1beta1.AnnotationSandboxTemplateRef]; v != "" {
		return v
	}
	return none
}

// ObserveDecisions counts failed policy validations.
func ObserveDecisions(ds []policy.Decision) { observeDecisions(PolicyDecisions, ds) }

// ObserveAdmission counts the webhook's failed validations.
func ObserveAdmission(ds []policy.Decision) { observeDecisions(AdmissionDecisions, ds) }

func observeDecisions(c *prometheus.CounterVec, ds []policy.Decision) {
	for _, d := range ds {
		c.WithLabelValues(policyLabel.value(d.Policy), ruleLabel.value(strconv.Itoa(d.Rule)), knownOr(string(d.Action), string(policy.Deny), string(policy.Warn), string(policy.Audit))).Inc()
	}
}
