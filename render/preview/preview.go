package preview

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// Lookup finds the objects another one refers to. Each returns nil without
// an error when there is no such object, and an error when it could not
// look.
type Lookup interface {
	Template(namespace, name string) (*extv1beta1.SandboxTemplate, error)
	Pool(namespace, name string) (*extv1beta1.SandboxWarmPool, error)
}

// Inputs is one object to preview and what it is previewed with.
type Inputs struct {
	// Object is a *Sandbox, *SandboxTemplate, *SandboxWarmPool or
	// *SandboxClaim at v1beta1, its metadata filled (Fill). It is not
	// changed.
	Object any
	// Lookup finds a pool's template and a claim's pool and template; nil
	// finds nothing.
	Lookup Lookup
	// Defaults are the controller's defaults for a Sandbox (the runtime
	// class it sets where the Sandbox names none); nil is none.
	Defaults func(*sandboxv1beta1.Sandbox) render.Defaults
	// ControllerNamespace is where the sandbox router runs (a template's
	// NetworkPolicy admits it).
	ControllerNamespace string
	// Members, when set, plans a pool's members as the controller would
	// (named with render.SeededSuffixes, the same on every run) and lists
	// them in Made; the member judged is then named like the first.
	Members bool
}

// Object is one rendered object: an apply configuration and its kind.
type Object struct {
	GVK    schema.GroupVersionKind
	Object any
}

// Missing is a pool or template an object refers to that the Lookup did
// not find: what it makes could not be rendered.
type Missing struct {
	Kind, Name string
	// Pool is the pool whose template is missing, for a claim.
	Pool string
}

// Preview is what an object stands for.
type Preview struct {
	// Made is what the object makes directly, as the controller would
	// apply it: a Sandbox's Pod, Service and PVCs; a template's
	// NetworkPolicy; a pool's members (with Inputs.Members); a claim's
	// Sandbox.
	Made []Object
	// Member is the Pod, Service and PVCs of the Sandbox a template, pool
	// or claim makes (one stands for all of a pool's members): what the
	// policies judge besides Made.
	Member []Object
	// Missing is set when a pool or template it refers to was not found;
	// Made and Member are then empty, or hold only what did not need it.
	Missing *Missing
}

var (
	gvkSandbox       = sandboxv1beta1.GroupVersion.WithKind("Sandbox")
	gvkNetworkPolicy = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
)

// Fill sets what the API server would on an object about to be created:
// its namespace and name where unset (a generated name stands in for
// generateName), a placeholder UID (rendered owner references need one)
// and generation 1.
func Fill(m metav1.Object, namespace, name string) {
	if m.GetNamespace() == "" {
		m.SetNamespace(namespace)
	}
	if m.GetName() == "" {
		m.SetName(name)
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + "x")
	}
	if m.GetUID() == "" {
		m.SetUID(render.PlaceholderUID)
	}
	if m.GetGeneration() == 0 {
		m.SetGeneration(1)
	}
}

// Render renders what in.Object stands for. An error is a refusal the
// controller would make too (a render error, a claim's rejection:
// *render.ClaimRejection) or a Lookup's failure.
func Render(in Inputs) (Preview, error) {
	switch obj := in.Object.(type) {
	case *sandboxv1beta1.Sandbox:
		children, err := children(obj, in.Defaults)
		return Preview{Made: children}, err
	case *extv1beta1.SandboxTemplate:
		return template(in, obj)
	case *extv1beta1.SandboxWarmPool:
		return pool(in, obj)
	case *extv1beta1.SandboxClaim:
		return claim(in, obj)
	}
	return Preview{}, fmt.Errorf("%T is not a kind of ours at v1beta1", in.Object)
}

func template(in Inputs, t *extv1beta1.SandboxTemplate) (Preview, error) {
	desired, err := render.Template(render.TemplateInputs{Template: t, ControllerNamespace: in.ControllerNamespace})
	if err != nil {
		return Preview{}, err
	}
	var out Preview
	if desired.NetworkPolicy != nil {
		out.Made = append(out.Made, Object{gvkNetworkPolicy, desired.NetworkPolicy})
	}
	out.Member, err = member(in, member0(t, t.Name))
	return out, err
}

func pool(in Inputs, p *extv1beta1.SandboxWarmPool) (Preview, error) {
	t, err := lookupTemplate(in, p.Namespace, p.Spec.TemplateRef.Name)
	if err != nil || t == nil {
		return Preview{Missing: &Missing{Kind: "SandboxTemplate", Name: p.Spec.TemplateRef.Name}}, err
	}
	var out Preview
	name := t.Name
	if in.Members {
		// The controller names members at random; a preview names them
		// alike, the same way on every run.
		suffix := render.SeededSuffixes(p.Namespace + "/" + p.Name)
		plan, err := render.PlanWarmPool(render.WarmPoolPlanInputs{WarmPoolInputs: render.WarmPoolInputs{Pool: p, Template: t}, Suffix: suffix})
		if err != nil {
			return Preview{}, err
		}
		for _, s := range plan.Steps {
			if s.Action == render.ActionCreate {
				out.Made = append(out.Made, Object{gvkSandbox, s.Object})
			}
		}
		name = render.MemberName(p.Name, suffix(0))
	}
	// Members render alike: one stands for all, planned or not.
	out.Member, err = member(in, member0(t, name))
	return out, err
}

func claim(in Inputs, c *extv1beta1.SandboxClaim) (Preview, error) {
	p, err := lookupPool(in, c.Namespace, c.Spec.WarmPoolRef.Name)
	if err != nil || p == nil {
		return Preview{Missing: &Missing{Kind: "SandboxWarmPool", Name: c.Spec.WarmPoolRef.Name}}, err
	}
	t, err := lookupTemplate(in, p.Namespace, p.Spec.TemplateRef.Name)
	if err != nil || t == nil {
		return Preview{Missing: &Missing{Kind: "SandboxTemplate", Name: p.Spec.TemplateRef.Name, Pool: p.Name}}, err
	}
	// What a cold start creates; a warm claim takes a pool member instead
	// (rendered with the pool).
	ac, err := render.ClaimSandbox(render.ClaimInputs{Claim: c, Template: t})
	if err != nil {
		return Preview{}, err
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(ac, sb); err != nil {
		return Preview{}, err
	}
	out := Preview{Made: []Object{{gvkSandbox, ac}}}
	out.Member, err = member(in, sb)
	return out, err
}

// member0 is the Sandbox a template makes, named name (a pool member's
// name; a name that cannot name a Sandbox's Service is replaced).
func member0(t *extv1beta1.SandboxTemplate, name string) *sandboxv1beta1.Sandbox {
	sb := render.TemplateProbe(t)
	sb.Name = name
	if len(validation.IsDNS1035Label(name)) > 0 {
		sb.Name = "template-member"
	}
	sb.UID, sb.Generation = render.PlaceholderUID, 1
	return sb
}

func member(in Inputs, sb *sandboxv1beta1.Sandbox) ([]Object, error) {
	out, err := children(sb, in.Defaults)
	if err != nil {
		return nil, fmt.Errorf("the Sandbox it makes: %w", err)
	}
	return out, nil
}

// children renders a Sandbox with its defaults: its Pod, Service and PVCs.
func children(sb *sandboxv1beta1.Sandbox, defaults func(*sandboxv1beta1.Sandbox) render.Defaults) ([]Object, error) {
	var d render.Defaults
	if defaults != nil {
		d = defaults(sb)
	}
	checks, err := render.SandboxObjects(sb, d)
	if err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(checks))
	for _, c := range checks {
		gvk, _ := c.GVK()
		out = append(out, Object{gvk, c.Object})
	}
	return out, nil
}

func lookupTemplate(in Inputs, namespace, name string) (*extv1beta1.SandboxTemplate, error) {
	if in.Lookup == nil {
		return nil, nil
	}
	return in.Lookup.Template(namespace, name)
}

func lookupPool(in Inputs, namespace, name string) (*extv1beta1.SandboxWarmPool, error) {
	if in.Lookup == nil {
		return nil, nil
	}
	return in.Lookup.Pool(namespace, name)
}
