package render

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// CreatedBy is the value of the created-by label on Sandboxes the
// controller makes from templates (warm pool members and cold claims).
const CreatedBy = "controller"

// TemplateSpec is the Sandbox spec a template stands for, with the secure
// default upstream also writes: no service-account token unless the
// template asks for one. The runtime class is left as the template has it:
// a default one is given to the Pod when the Sandbox is rendered (see
// Defaults), never written into the Sandbox.
func TemplateSpec(t *extv1beta1.SandboxTemplate) sandboxv1beta1.SandboxSpec {
	spec := sandboxv1beta1.SandboxSpec{SandboxBlueprint: t.Spec.Blueprint()}
	pod := &spec.PodTemplate.Spec
	if pod.AutomountServiceAccountToken == nil {
		pod.AutomountServiceAccountToken = ptr.To(false)
	}
	return spec
}

// TemplateHash is the sandbox-template-hash of a Sandbox spec: FNV-1a over
// everything that shapes the Pod and its volumes, leaving out the pod
// template's metadata, so a label or annotation edit never makes members
// stale. 8 lowercase hex digits.
func TemplateHash(spec *sandboxv1beta1.SandboxSpec) string {
	shape := struct {
		Pod     any `json:"pod"`
		Volumes any `json:"volumes,omitempty"`
		Service any `json:"service,omitempty"`
	}{spec.PodTemplate.Spec, spec.VolumeClaimTemplates, spec.Service}
	b, err := json.Marshal(shape)
	if err != nil {
		// Marshalling API types does not fail; hash the error so a
		// failure shows up as staleness rather than a panic.
		b = []byte(err.Error())
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
}

// WarmPoolInputs is everything a pool member renders from.
type WarmPoolInputs struct {
	// Pool is the SandboxWarmPool. Required, with name, namespace and UID.
	Pool *extv1beta1.SandboxWarmPool
	// Template is the SandboxTemplate the pool names.
	Template *extv1beta1.SandboxTemplate
}

// PoolSelector is the label selector (as a string) matching a pool's
// members, reported in status.selector for the scale subresource.
func PoolSelector(pool string) string {
	return sandboxv1beta1.LabelWarmPoolSandbox + "=" + NameHash(pool)
}

// WarmPoolMember renders the Sandbox a pool keeps warm under a given name:
// the template's spec (TemplateSpec), owned by the pool, labeled
// with the pool, the template and the hash of the spec.
func WarmPoolMember(in WarmPoolInputs, name string) (*sandboxac.SandboxApplyConfiguration, error) {
	p, t := in.Pool, in.Template
	if p == nil || p.Name == "" || p.Namespace == "" || p.UID == "" {
		return nil, fmt.Errorf("render: warm pool needs a name, namespace and uid")
	}
	if t == nil || t.Name == "" {
		return nil, fmt.Errorf("render: warm pool %s: no template", p.Name)
	}
	spec := TemplateSpec(t)
	sb, err := templateSandbox(name, p.Namespace, t.Name, &spec)
	if err != nil {
		return nil, err
	}
	sb.WithLabels(map[string]string{
		sandboxv1beta1.LabelWarmPoolSandbox: NameHash(p.Name),
		sandboxv1beta1.LabelLaunchType:      sandboxv1beta1.LaunchTypeWarm,
	}).
		WithOwnerReferences(controllerRef(p, extv1beta1.GroupVersion.WithKind("SandboxWarmPool")))
	return sb, nil
}

// templateSandbox renders a Sandbox made from a template: the spec and the
// labels and annotation that tie it to the template.
func templateSandbox(name, namespace, template string, spec *sandboxv1beta1.SandboxSpec) (*sandboxac.SandboxApplyConfiguration, error) {
	specAC := &sandboxac.SandboxSpecApplyConfiguration{}
	if err := convert.JSON(spec, specAC); err != nil {
		return nil, fmt.Errorf("render: sandbox spec from template %s: %w", template, err)
	}
	return sandboxac.Sandbox(name, namespace).
		WithLabels(map[string]string{
			sandboxv1beta1.LabelSandboxTemplateRefHash: NameHash(template),
			sandboxv1beta1.LabelSandboxTemplateHash:    TemplateHash(spec),
			sandboxv1beta1.LabelCreatedBy:              CreatedBy,
		}).
		WithAnnotations(map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: template}).
		WithSpec(specAC), nil
}

// WarmPoolRemovals returns the members the pool is about to delete, as
// PlanWarmPool decides it: stale members under Recreate, then the excess
// over replicas (not Ready first, then newest). A claim never takes one of
// these: the pool may be deleting it at that very moment.
func WarmPoolRemovals(in WarmPoolPlanInputs) []*sandboxv1beta1.Sandbox {
	if in.Pool == nil {
		return nil
	}
	return removals(in).remove
}

type removalPlan struct {
	// hash is the template's TemplateHash, refHash the NameHash of its
	// name (empty without a template).
	hash, refHash string
	stale         int
	live          int
	// remove are the members to delete, why says why (by index).
	remove []*sandboxv1beta1.Sandbox
	why    []string
}

// removals decides which members go: with a template, a member is stale
// when it was made from another template (its template-ref-hash label is
// not the NameHash of the name the pool refers to, as upstream decides:
// a new reference rolls the pool even to a template of the same spec) or
// from another spec of it (its template-hash label); under Recreate stale
// members go, under OnReplenish they stay until claimed. Then the excess
// over replicas goes, not Ready first and then newest.
func removals(in WarmPoolPlanInputs) removalPlan {
	var out removalPlan
	p := in.Pool
	want := replicas(p)
	recreate := p.Spec.UpdateStrategy != nil && p.Spec.UpdateStrategy.Type == extv1beta1.UpdateStrategyRecreate
	if in.Template != nil {
		spec := TemplateSpec(in.Template)
		out.hash, out.refHash = TemplateHash(&spec), NameHash(in.Template.Name)
	}
	var live []*sandboxv1beta1.Sandbox
	for _, m := range in.members() {
		if m.DeletionTimestamp != nil {
			continue
		}
		if why := out.staleness(m); why != "" {
			out.stale++
			if recreate {
				out.remove = append(out.remove, m)
				out.why = append(out.why, "stale under Recreate: "+why)
				continue
			}
		}
		live = append(live, m)
	}
	out.live = len(live)
	if count := len(live) + len(in.Pending); count > want {
		excess := min(count-want, len(live))
		live = slices.Clone(live)
		sortForRemoval(live)
		for _, m := range live[:excess] {
			why := "Ready, newest first"
			if !IsSandboxReady(m) {
				why = "not Ready, before any Ready one"
			}
			out.remove = append(out.remove, m)
			out.why = append(out.why, fmt.Sprintf("excess over %d replicas: %s", want, why))
		}
		out.live -= excess
	}
	return out
}

// staleness says why a member is stale, "" when it is not (or there is no
// template to judge it by).
func (r removalPlan) staleness(m *sandboxv1beta1.Sandbox) string {
	if r.hash == "" {
		return ""
	}
	if have := m.Labels[sandboxv1beta1.LabelSandboxTemplateRefHash]; have != r.refHash {
		return fmt.Sprintf("template-ref hash %s, the pool's template's is %s", orNone(have), r.refHash)
	}
	if have := m.Labels[sandboxv1beta1.LabelSandboxTemplateHash]; have != r.hash {
		return fmt.Sprintf("template hash %s, the template's is %s", orNone(have), r.hash)
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// replicas is the number of members a pool wants (1 when unset).
func replicas(p *extv1beta1.SandboxWarmPool) int {
	if p.Spec.Replicas != nil {
		return int(*p.Spec.Replicas)
	}
	return 1
}

// sortForRemoval orders members so the first ones are the best to remove:
// not Ready before Ready, then newest first (by creation time, then name).
func sortForRemoval(members []*sandboxv1beta1.Sandbox) {
	sort.SliceStable(members, func(i, j int) bool {
		a, b := members[i], members[j]
		ra, rb := IsSandboxReady(a), IsSandboxReady(b)
		if ra != rb {
			return !ra
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
}

// IsSandboxReady reports a Sandbox whose Ready condition is True.
func IsSandboxReady(sb *sandboxv1beta1.Sandbox) bool {
	c := apimeta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// TemplateProbe is the Sandbox a template stands for, as the policies judge
// it before any pool or claim uses it: the template's spec (TemplateSpec),
// named like the template when that name can name a Sandbox's Service
// (members are named after their pool, so a template name that could not
// is no fault of the template's). Render it with the controller's
// Defaults to judge the Pod it becomes.
func TemplateProbe(t *extv1beta1.SandboxTemplate) *sandboxv1beta1.Sandbox {
	name := t.Name
	if len(validation.IsDNS1035Label(name)) > 0 {
		name = "template-member"
	}
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxTemplateRefHash: NameHash(t.Name)}},
		Spec: TemplateSpec(t),
	}
}
