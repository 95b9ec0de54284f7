package e2b

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Labels and annotations of the claims this package makes.
const (
	// LabelSandbox marks a claim made through the E2B API: only those
	// are E2B sandboxes (listed, addressed by ID).
	LabelSandbox = "e2b.agents.x-k8s.io/sandbox"
	// MetadataLabelPrefix prefixes the label of each metadata entry whose
	// key and value are valid as a label's (list filters use them).
	MetadataLabelPrefix = "metadata.e2b.agents.x-k8s.io/"
	// AnnotationMetadata holds all of the sandbox's metadata (JSON).
	AnnotationMetadata = "e2b.agents.x-k8s.io/metadata"
	// AnnotationTemplateID is the templateID the sandbox was created with.
	AnnotationTemplateID = "e2b.agents.x-k8s.io/template-id"
	// AnnotationAutoResume "true": data-plane requests resume the sandbox
	// when it is paused (autoResume.enabled).
	AnnotationAutoResume = "e2b.agents.x-k8s.io/auto-resume"
)

// Bounds of a create request's metadata and envVars.
const (
	maxMetadataEntries = 64
	maxMetadataKey     = 256
	maxMetadataValue   = 4096
	maxEnvVars         = 128
	maxEnvValue        = 32 << 10
)

// isE2BClaim reports a claim this package made.
func isE2BClaim(c *extv1beta1.SandboxClaim) bool {
	return c.Labels[LabelSandbox] == "true"
}

// metadataLabel is the label of a metadata entry, or false when the key or
// value cannot be a label's.
func metadataLabel(k, v string) (string, bool) {
	key := MetadataLabelPrefix + k
	if len(validation.IsQualifiedName(key)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
		return "", false
	}
	return key, true
}

func checkMetadata(md map[string]string) error {
	if len(md) > maxMetadataEntries {
		return fmt.Errorf("metadata has %d entries, at most %d are allowed", len(md), maxMetadataEntries)
	}
	for k, v := range md {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return fmt.Errorf("metadata key %.40q: keys must have 1 to %d bytes and values at most %d", k, maxMetadataKey, maxMetadataValue)
		}
	}
	return nil
}

func checkEnv(env map[string]string) ([]extv1beta1.EnvVar, error) {
	if len(env) > maxEnvVars {
		return nil, fmt.Errorf("envVars has %d entries, at most %d are allowed", len(env), maxEnvVars)
	}
	out := make([]extv1beta1.EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if errs := validation.IsEnvVarName(k); len(errs) > 0 || len(k) > 256 {
			return nil, fmt.Errorf("envVars: %.60q is not a valid environment variable name", k)
		}
		if len(env[k]) > maxEnvValue {
			return nil, fmt.Errorf("envVars: the value of %s is longer than %d bytes", k, maxEnvValue)
		}
		out = append(out, extv1beta1.EnvVar{Name: k, Value: env[k]})
	}
	return out, nil
}

// newClaim is the claim of a create request.
func newClaim(namespace, name, pool string, req *createRequest, now time.Time, env []extv1beta1.EnvVar) (*extv1beta1.SandboxClaim, error) {
	md, err := json.Marshal(req.Metadata)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{LabelSandbox: "true"}
	for k, v := range req.Metadata {
		if key, ok := metadataLabel(k, v); ok {
			labels[key] = v
		}
	}
	annotations := map[string]string{AnnotationTemplateID: req.TemplateID}
	if len(req.Metadata) > 0 {
		annotations[AnnotationMetadata] = string(md)
	}
	if req.AutoResume != nil && req.AutoResume.Enabled {
		annotations[AnnotationAutoResume] = "true"
	}
	end := metav1.NewTime(now.Add(req.timeout()).Truncate(time.Second))
	return &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations},
		Spec: extv1beta1.SandboxClaimSpec{
			WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool},
			Lifecycle:   &extv1beta1.Lifecycle{ShutdownTime: &end, ShutdownPolicy: extv1beta1.ShutdownPolicyDelete},
			Env:         env,
		},
	}, nil
}

// metadataOf is a claim's metadata (none when unreadable).
func metadataOf(c *extv1beta1.SandboxClaim) map[string]string {
	md := map[string]string{}
	if raw := c.Annotations[AnnotationMetadata]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &md)
	}
	return md
}

// readyCondition is the claim's Ready condition, nil without one.
func readyCondition(c *extv1beta1.SandboxClaim) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == extv1beta1.ConditionReady {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// terminalReasons are Ready=False reasons that no wait will change: the
// claim as written cannot be served.
var terminalReasons = []string{extv1beta1.ReasonTemplateNotFound, extv1beta1.ReasonWarmPoolNotFound,
	extv1beta1.ReasonInvalidMetadata, extv1beta1.ReasonEnvVarsInjectionRejected, extv1beta1.ReasonVolumeClaimTemplatesError,
	extv1beta1.ReasonPolicyDenied, extv1beta1.ReasonClaimExpired, extv1beta1.ReasonSandboxExpired}

// claimState says whether a claim is ready (true), can never be
// (a message), or may become ready.
func claimState(c *extv1beta1.SandboxClaim) (ready bool, failed string) {
	cond := readyCondition(c)
	switch {
	case c.DeletionTimestamp != nil:
		return false, "the sandbox is being deleted"
	case cond == nil || cond.ObservedGeneration < c.Generation:
		return false, ""
	case cond.Status == metav1.ConditionTrue:
		return c.Status.Sandbox.Name != "", ""
	case slices.Contains(terminalReasons, cond.Reason):
		return false, cond.Reason + ": " + cond.Message
	}
	return false, ""
}

// TrimClaim reduces a cached SandboxClaim to what this package reads:
// identity, labels, this package's annotations, lifecycle, the Ready
// condition and the bound Sandbox's name (CacheOptions.TrimClaim).
func TrimClaim(obj any) (any, error) {
	c, ok := obj.(*extv1beta1.SandboxClaim)
	if !ok {
		return obj, nil
	}
	out := &extv1beta1.SandboxClaim{
		TypeMeta: c.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion,
			Generation: c.Generation, Labels: c.Labels, DeletionTimestamp: c.DeletionTimestamp, CreationTimestamp: c.CreationTimestamp},
		Spec:   extv1beta1.SandboxClaimSpec{WarmPoolRef: c.Spec.WarmPoolRef, Lifecycle: c.Spec.Lifecycle},
		Status: extv1beta1.SandboxClaimStatus{Sandbox: extv1beta1.ClaimedSandbox{Name: c.Status.Sandbox.Name}},
	}
	if cond := readyCondition(c); cond != nil {
		out.Status.Conditions = []metav1.Condition{*cond}
	}
	for k, v := range c.Annotations {
		if strings.HasPrefix(k, "e2b.agents.x-k8s.io/") {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out, nil
}

// sandboxInfo is E2B's description of a sandbox (list, getInfo; create
// and connect answer a subset).
type sandboxInfo struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	ClientID        string            `json:"clientID"`
	StartedAt       string            `json:"startedAt,omitempty"`
	EndAt           string            `json:"endAt,omitempty"`
	State           string            `json:"state,omitempty"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	EnvdVersion     string            `json:"envdVersion"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
}

// States of a sandbox.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// stateOf is a claim's state, from its Sandbox's operatingMode (sb nil:
// not bound yet, running).
func stateOf(sb *sandboxv1beta1.Sandbox) string {
	if sb != nil && sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		return StatePaused
	}
	return StateRunning
}

// startedAt, endAt in RFC 3339.
func times(c *extv1beta1.SandboxClaim) (string, string) {
	start := c.CreationTimestamp.UTC().Format(time.RFC3339)
	end := ""
	if c.Spec.Lifecycle != nil && c.Spec.Lifecycle.ShutdownTime != nil {
		end = c.Spec.Lifecycle.ShutdownTime.UTC().Format(time.RFC3339)
	}
	return start, end
}
