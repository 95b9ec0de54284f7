package render

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// ClaimRejection is a claim the controller cannot serve as written: the
// reason is one of the claim's Ready reasons, the message says what to change.
// It is terminal: the same claim is refused again until it or its template
// changes.
type ClaimRejection struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (r *ClaimRejection) Error() string { return r.Message }

// ClaimInputs is everything a claim's Sandbox renders from.
type ClaimInputs struct {
	// Claim is the SandboxClaim. Required, with name, namespace and UID.
	Claim *extv1beta1.SandboxClaim
	// Template is the SandboxTemplate of the claim's warm pool.
	Template *extv1beta1.SandboxTemplate
	// TraceContext, when set, is the trace-context annotation value of the
	// reconcile that makes the Sandbox (its span): the Sandbox carries it.
	TraceContext string
}

// NeedsColdStart reports a claim no warm member can serve: one that injects
// environment variables or asks for its own volumes, which a running Pod
// cannot take on.
func NeedsColdStart(c *extv1beta1.SandboxClaim) bool {
	return len(c.Spec.Env) > 0 || len(c.Spec.VolumeClaimTemplates) > 0
}

// ValidateClaim checks a claim against its template's injection policies
// and the rules for additional Pod metadata. Nil means the claim can be
// served.
func ValidateClaim(c *extv1beta1.SandboxClaim, t *extv1beta1.SandboxTemplate) *ClaimRejection {
	if rej := ValidateClaimMetadata(c); rej != nil {
		return rej
	}
	spec := t.Spec.Blueprint()
	if rej := MetadataConflict(spec.PodTemplate.ObjectMeta, c.Spec.AdditionalPodMetadata); rej != nil {
		return rej
	}
	if _, rej := injectEnv(&spec.PodTemplate.Spec, c.Spec.Env, policyOrDefault(t.Spec.EnvVarsInjectionPolicy), t.Name); rej != nil {
		return rej
	}
	if _, rej := mergeVolumeClaimTemplates(&spec, c.Spec.VolumeClaimTemplates, policyOrDefault(t.Spec.VolumeClaimTemplatesPolicy), t.Name); rej != nil {
		return rej
	}
	return nil
}

// MetadataConflict refuses, as upstream does (a ReconcilerError), a claim's
// additional Pod label or annotation that the Pod's metadata (the
// template's, or a warm member's) already sets to another value.
func MetadataConflict(base, extra sandboxv1beta1.PodMetadata) *ClaimRejection {
	for _, kind := range []struct {
		what       string
		base, want map[string]string
	}{{"label", base.Labels, extra.Labels}, {"annotation", base.Annotations, extra.Annotations}} {
		for _, k := range sortedKeys(kind.want) {
			if v, ok := kind.base[k]; ok && v != kind.want[k] {
				return &ClaimRejection{Reason: extv1beta1.ReasonReconcilerError,
					Message: fmt.Sprintf("metadata override conflict: %s %q is defined in template with value %q, but claim requests %q", kind.what, k, v, kind.want[k])}
			}
		}
	}
	return nil
}

// ValidateClaimMetadata checks the additional Pod metadata of a claim, the
// only part of a claim that applies to a warm member.
func ValidateClaimMetadata(c *extv1beta1.SandboxClaim) *ClaimRejection {
	if msg := validatePodMetadata(c.Spec.AdditionalPodMetadata); msg != "" {
		return &ClaimRejection{Reason: extv1beta1.ReasonInvalidMetadata, Message: msg}
	}
	return nil
}

func policyOrDefault(p extv1beta1.InjectionPolicy) extv1beta1.InjectionPolicy {
	if p == "" {
		return extv1beta1.InjectionPolicyDisallowed
	}
	return p
}

// validatePodMetadata refuses keys that container runtimes read (they could
// change the Pod's isolation), keys the controller or Kubernetes reserve and
// keys or values that are not valid label syntax. Like upstream's, it
// reports the first problem (labels, then annotations, by key) in upstream's
// words: "invalid additionalPodMetadata: failed to validate label|annotation
// %q: <detail>"; the runtime-key detail is ours (upstream has no such rule).
func validatePodMetadata(m sandboxv1beta1.PodMetadata) string {
	check := func(what, key string) string {
		prefix, _, _ := strings.Cut(key, "/")
		switch {
		case runtimeKeyReason(key) != "":
			return fmt.Sprintf("it could change the Sandbox's isolation: %s; set it in the SandboxTemplate if it is needed", runtimeKeyReason(key))
		case IsReservedKey(key) || isSystemKey(key):
			return fmt.Sprintf("restricted system domain: %q is not allowed in AdditionalPodMetadata", prefix)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Sprintf("invalid %s key: %q: %s", what, key, strings.Join(errs, "; "))
		}
		return ""
	}
	failed := func(what, key, detail string) string {
		return fmt.Sprintf("invalid additionalPodMetadata: failed to validate %s %q: %s", what, key, detail)
	}
	for _, k := range sortedKeys(m.Labels) {
		if d := check("label", k); d != "" {
			return failed("label", k, d)
		}
		if errs := validation.IsValidLabelValue(m.Labels[k]); len(errs) > 0 {
			return failed("label", k, fmt.Sprintf("invalid label value: %q does not match allowed pattern: %s", m.Labels[k], strings.Join(errs, "; ")))
		}
	}
	for _, k := range sortedKeys(m.Annotations) {
		if d := check("annotation", k); d != "" {
			return failed("annotation", k, d)
		}
	}
	return ""
}

func isSystemKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// injectEnv adds a claim's variables to the Pod: to the named container
// (regular or init), or to the first container when containerName is empty.
// Under Allowed a variable the template already sets, or a container that
// takes variables from envFrom, is refused; under Overrides the value is
// replaced.
func injectEnv(spec *corev1.PodSpec, env []extv1beta1.EnvVar, policy extv1beta1.InjectionPolicy, template string) (*corev1.PodSpec, *ClaimRejection) {
	if len(env) == 0 {
		return spec, nil
	}
	reject := func(format string, args ...any) *ClaimRejection {
		return &ClaimRejection{Reason: extv1beta1.ReasonEnvVarsInjectionRejected, Message: fmt.Sprintf(format, args...)}
	}
	// Upstream's texts and reasons: a missing container and an override
	// under Allowed are ReconcilerErrors there.
	failed := func(format string, args ...any) *ClaimRejection {
		return &ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: fmt.Sprintf(format, args...)}
	}
	if policy == extv1beta1.InjectionPolicyDisallowed {
		return nil, reject("environment variable injection rejected: environment variable injection is not allowed by the template policy")
	}
	for _, v := range env {
		c := targetContainer(spec, v.ContainerName)
		if c == nil {
			return nil, failed("target container %q not found in template for environment variable %q", v.ContainerName, v.Name)
		}
		if policy != extv1beta1.InjectionPolicyOverrides && len(c.EnvFrom) > 0 {
			return nil, reject("environment variable injection rejected: container %q uses EnvFrom sources; Allowed policy cannot safely prevent overriding EnvFrom-provided variables", c.Name)
		}
		found := false
		for j := range c.Env {
			if c.Env[j].Name != v.Name {
				continue
			}
			if policy != extv1beta1.InjectionPolicyOverrides {
				return nil, failed("environment variable override is not allowed by the template policy for variable %q", v.Name)
			}
			c.Env[j] = corev1.EnvVar{Name: v.Name, Value: v.Value}
			found = true
		}
		if !found {
			c.Env = append(c.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
		}
	}
	return spec, nil
}

func targetContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	if name == "" {
		if len(spec.Containers) == 0 {
			return nil
		}
		return &spec.Containers[0]
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	return nil
}

// mergeVolumeClaimTemplates adds a claim's volume claim templates to the
// template's (bp). Under Allowed a name the template already uses is
// refused; under Overrides the claim's template replaces it. Either way a
// claim cannot replace a template volume of another kind, nor attach
// existing data the template does not (checkClaimVCT).
func mergeVolumeClaimTemplates(bp *sandboxv1beta1.SandboxBlueprint, extra []sandboxv1beta1.PersistentVolumeClaimTemplate, policy extv1beta1.InjectionPolicy, template string) ([]sandboxv1beta1.PersistentVolumeClaimTemplate, *ClaimRejection) {
	base := bp.VolumeClaimTemplates
	if len(extra) == 0 {
		return base, nil
	}
	reject := func(format string, args ...any) *ClaimRejection {
		return &ClaimRejection{Reason: extv1beta1.ReasonVolumeClaimTemplatesError, Message: fmt.Sprintf(format, args...)}
	}
	// Upstream's texts, and its order: names are validated before the
	// policy is checked.
	seen := map[string]bool{}
	for i, v := range extra {
		if v.Name == "" {
			return nil, reject("failed to merge volume claim templates: claim: invalid volume claim templates: name at index %d is empty", i)
		}
		if seen[v.Name] {
			return nil, reject("failed to merge volume claim templates: claim: invalid volume claim templates: duplicate name %q", v.Name)
		}
		seen[v.Name] = true
	}
	if policy == extv1beta1.InjectionPolicyDisallowed {
		return nil, reject("failed to merge volume claim templates: volume claim templates are disallowed by the template")
	}
	out := append([]sandboxv1beta1.PersistentVolumeClaimTemplate(nil), base...)
	for _, v := range extra {
		if msg := checkClaimVCT(&v, bp.PodTemplate.Spec.Volumes, base, template); msg != "" {
			return nil, reject("%s", msg)
		}
		replaced := false
		for i := range out {
			if out[i].Name != v.Name {
				continue
			}
			if policy != extv1beta1.InjectionPolicyOverrides {
				return nil, reject("failed to merge volume claim templates: overriding volume claim templates is forbidden by the template: cannot override template volume %q", v.Name)
			}
			out[i] = *v.DeepCopy()
			replaced = true
		}
		if !replaced {
			out = append(out, *v.DeepCopy())
		}
	}
	return out, nil
}

// ClaimSandbox renders the Sandbox a claim cold-starts: named after the
// claim, owned by it, made from the template with the claim's variables,
// volumes and Pod metadata, and annotated with the resume annotations of
// the template and the claim (the claim's value wins) and, when given, the
// reconcile's trace context.
func ClaimSandbox(in ClaimInputs) (*sandboxac.SandboxApplyConfiguration, error) {
	c, t := in.Claim, in.Template
	if c == nil || c.Name == "" || c.Namespace == "" || c.UID == "" {
		return nil, fmt.Errorf("render: claim needs a name, namespace and uid")
	}
	if t == nil || t.Name == "" {
		return nil, fmt.Errorf("render: claim %s: no template", c.Name)
	}
	if rej := ValidateClaim(c, t); rej != nil {
		return nil, rej
	}
	spec := TemplateSpec(t)
	if _, rej := injectEnv(&spec.PodTemplate.Spec, c.Spec.Env, policyOrDefault(t.Spec.EnvVarsInjectionPolicy), t.Name); rej != nil {
		return nil, rej
	}
	vcts, rej := mergeVolumeClaimTemplates(&spec.SandboxBlueprint, c.Spec.VolumeClaimTemplates, policyOrDefault(t.Spec.VolumeClaimTemplatesPolicy), t.Name)
	if rej != nil {
		return nil, rej
	}
	spec.VolumeClaimTemplates = vcts
	addPodMetadata(&spec.PodTemplate.ObjectMeta, c.Spec.AdditionalPodMetadata)

	sb, err := templateSandbox(c.Name, c.Namespace, t.Name, &spec)
	if err != nil {
		return nil, err
	}
	sb.WithLabels(map[string]string{
		sandboxv1beta1.LabelClaimUID:   string(c.UID),
		sandboxv1beta1.LabelLaunchType: sandboxv1beta1.LaunchTypeCold,
	}).WithOwnerReferences(controllerRef(c, extv1beta1.GroupVersion.WithKind("SandboxClaim"))).
		WithAnnotations(sandboxv1beta1.ResumeAnnotations(t.Annotations, c.Annotations))
	// As upstream's cold Sandbox: no template hash (that is for pool
	// members), and created-by only as the claim's own label says.
	delete(sb.Labels, sandboxv1beta1.LabelSandboxTemplateHash)
	delete(sb.Labels, sandboxv1beta1.LabelCreatedBy)
	if v := c.Labels[sandboxv1beta1.LabelCreatedBy]; v != "" {
		sb.Labels[sandboxv1beta1.LabelCreatedBy] = v
	}
	if in.TraceContext != "" {
		sb.WithAnnotations(map[string]string{sandboxv1beta1.AnnotationTraceContext: in.TraceContext})
	}
	return sb, nil
}

func addPodMetadata(dst *sandboxv1beta1.PodMetadata, extra sandboxv1beta1.PodMetadata) {
	for k, v := range extra.Labels {
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels[k] = v
	}
	for k, v := range extra.Annotations {
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[k] = v
	}
}

// ClaimExpiry is when a claim expires: the earlier of its shutdownTime and
// ttlSecondsAfterFinished after its Sandbox finished. finished is when the
// Sandbox's Finished condition became True (zero if it has not). The result
// is zero when the claim does not expire.
func ClaimExpiry(c *extv1beta1.SandboxClaim, finished time.Time) time.Time {
	var at time.Time
	lc := c.Spec.Lifecycle
	if lc == nil {
		return at
	}
	if lc.ShutdownTime != nil {
		at = lc.ShutdownTime.Time
	}
	if lc.TTLSecondsAfterFinished != nil && !finished.IsZero() {
		ttl := finished.Add(time.Duration(*lc.TTLSecondsAfterFinished) * time.Second)
		if at.IsZero() || ttl.Before(at) {
			at = ttl
		}
	}
	return at
}
