package main

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// rendering is what one input document renders to.
type rendering struct {
	doc     document
	objects []any // apply configurations, or the input itself when passed through
	gvks    []schema.GroupVersionKind
	problem string // why it could not be rendered
	// missing is set when the problem is only that a pool or template it
	// refers to is not among the manifests.
	missing bool
	// checks are what policy check also judges: the Pod, Service and PVCs
	// of the Sandbox a template, pool or claim makes (render prints the
	// Sandbox, not these).
	checks    []any
	checkGVKs []schema.GroupVersionKind
}

// renderAll renders every document with the controller's render functions.
// Claims and pools find their pool and template among the documents.
func renderAll(o *options, docs []document) []rendering {
	docs = hubVersions(docs)
	templates := map[string]*extv1beta1.SandboxTemplate{}
	pools := map[string]*extv1beta1.SandboxWarmPool{}
	ns := func(u *unstructured.Unstructured) string {
		if u.GetNamespace() != "" {
			return u.GetNamespace()
		}
		return o.namespace
	}
	for _, d := range docs {
		switch d.Obj.GetKind() {
		case "SandboxTemplate":
			t := &extv1beta1.SandboxTemplate{}
			if decode(d.Obj, t) == nil {
				t.Namespace = ns(d.Obj)
				templates[t.Namespace+"/"+t.Name] = t
			}
		case "SandboxWarmPool":
			p := &extv1beta1.SandboxWarmPool{}
			if decode(d.Obj, p) == nil {
				p.Namespace = ns(d.Obj)
				pools[p.Namespace+"/"+p.Name] = p
			}
		}
	}
	defaults := func(sb *sandboxv1beta1.Sandbox) render.Defaults { return o.defaultsFor(sb, docs) }
	var out []rendering
	for _, d := range docs {
		r := rendering{doc: d}
		add := func(gvk schema.GroupVersionKind, obj any) {
			r.gvks = append(r.gvks, gvk)
			r.objects = append(r.objects, obj)
		}
		switch d.Obj.GetAPIVersion() + "/" + d.Obj.GetKind() {
		case "agents.x-k8s.io/v1beta1/Sandbox":
			sb := &sandboxv1beta1.Sandbox{}
			if err := decode(d.Obj, sb); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&sb.ObjectMeta, ns(d.Obj))
			children, err := render.SandboxObjects(sb, defaults(sb))
			if err != nil {
				r.problem = err.Error()
				break
			}
			for _, c := range children {
				gvk, _ := c.GVK()
				add(gvk, c.Object)
			}
		case "extensions.agents.x-k8s.io/v1beta1/SandboxTemplate":
			t := &extv1beta1.SandboxTemplate{}
			if err := decode(d.Obj, t); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&t.ObjectMeta, ns(d.Obj))
			desired, err := render.Template(render.TemplateInputs{Template: t, ControllerNamespace: o.controllerNS})
			if err != nil {
				r.problem = err.Error()
				break
			}
			if desired.NetworkPolicy != nil {
				add(gvkNetworkPolicy, desired.NetworkPolicy)
			}
			if err := r.check(templateMember(t, t.Name), defaults); err != nil {
				r.problem = err.Error()
			}
		case "extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool":
			p := &extv1beta1.SandboxWarmPool{}
			if err := decode(d.Obj, p); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&p.ObjectMeta, ns(d.Obj))
			t := templates[p.Namespace+"/"+p.Spec.TemplateRef.Name]
			if t == nil {
				t = lookupTemplate(o, p.Namespace, p.Spec.TemplateRef.Name)
			}
			if t == nil {
				r.problem = fmt.Sprintf("SandboxTemplate %s is not among the manifests%s; its members cannot be rendered", p.Spec.TemplateRef.Name, clusterNote(o))
				r.missing = true
				break
			}
			// The controller names members at random; a preview names them
			// alike, the same way on every run.
			suffix := render.SeededSuffixes(p.Namespace + "/" + p.Name)
			plan, err := render.PlanWarmPool(render.WarmPoolPlanInputs{WarmPoolInputs: render.WarmPoolInputs{Pool: p, Template: t}, Suffix: suffix})
			if err != nil {
				r.problem = err.Error()
				break
			}
			for _, s := range plan.Steps {
				if s.Action == render.ActionCreate {
					add(gvkSandbox, s.Object)
				}
			}
			// Members render alike: one stands for all, planned or not.
			if err := r.check(templateMember(t, render.MemberName(p.Name, suffix(0))), defaults); err != nil {
				r.problem = err.Error()
			}
		case "extensions.agents.x-k8s.io/v1beta1/SandboxClaim":
			c := &extv1beta1.SandboxClaim{}
			if err := decode(d.Obj, c); err != nil {
				r.problem = err.Error()
				break
			}
			fill(&c.ObjectMeta, ns(d.Obj))
			p := pools[c.Namespace+"/"+c.Spec.WarmPoolRef.Name]
			if p == nil && o.lookup != nil {
				found := &extv1beta1.SandboxWarmPool{}
				if o.lookup("SandboxWarmPool", c.Namespace, c.Spec.WarmPoolRef.Name, found) {
					p = found
				}
			}
			if p == nil {
				r.problem = fmt.Sprintf("SandboxWarmPool %s is not among the manifests%s; the claim cannot be rendered", c.Spec.WarmPoolRef.Name, clusterNote(o))
				r.missing = true
				break
			}
			t := templates[p.Namespace+"/"+p.Spec.TemplateRef.Name]
			if t == nil {
				t = lookupTemplate(o, p.Namespace, p.Spec.TemplateRef.Name)
			}
			if t == nil {
				r.problem = fmt.Sprintf("SandboxTemplate %s (of pool %s) is not among the manifests%s; the claim cannot be rendered", p.Spec.TemplateRef.Name, p.Name, clusterNote(o))
				r.missing = true
				break
			}
			// What a cold start creates; a warm claim takes a pool member
			// instead (rendered with the pool).
			sb, err := render.ClaimSandbox(render.ClaimInputs{Claim: c, Template: t})
			if err != nil {
				r.problem = err.Error()
				break
			}
			add(gvkSandbox, sb)
			cold := &sandboxv1beta1.Sandbox{}
			if err := convertTo(sb, cold); err != nil {
				r.problem = err.Error()
				break
			}
			if err := r.check(cold, defaults); err != nil {
				r.problem = err.Error()
			}
		default:
			// Not ours: passed through untouched.
			r.objects = append(r.objects, d.Obj)
			r.gvks = append(r.gvks, d.Obj.GroupVersionKind())
		}
		out = append(out, r)
	}
	return out
}

func lookupTemplate(o *options, namespace, name string) *extv1beta1.SandboxTemplate {
	if o.lookup == nil {
		return nil
	}
	t := &extv1beta1.SandboxTemplate{}
	if !o.lookup("SandboxTemplate", namespace, name, t) {
		return nil
	}
	return t
}

func clusterNote(o *options) string {
	if o.lookup != nil {
		return " nor in the cluster"
	}
	return " (add it, or use --from-cluster)"
}

var (
	gvkSandbox       = sandboxv1beta1.GroupVersion.WithKind("Sandbox")
	gvkNetworkPolicy = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
)

// hubVersions returns the documents with deprecated v1alpha1 objects
// converted to v1beta1, as the API server stores them, so everything below
// renders one version.
func hubVersions(docs []document) []document {
	out := make([]document, 0, len(docs))
	for _, d := range docs {
		var hub any
		switch d.Obj.GetAPIVersion() + "/" + d.Obj.GetKind() {
		case "agents.x-k8s.io/v1alpha1/Sandbox":
			in := &sandboxv1alpha1.Sandbox{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxTemplate":
			in := &extv1alpha1.SandboxTemplate{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxClaim":
			in := &extv1alpha1.SandboxClaim{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		case "extensions.agents.x-k8s.io/v1alpha1/SandboxWarmPool":
			in := &extv1alpha1.SandboxWarmPool{}
			if decode(d.Obj, in) == nil {
				hub = in.ToV1beta1()
			}
		}
		if hub != nil {
			if u, err := toUnstructured(hub); err == nil {
				d.Obj = u
			}
		}
		out = append(out, d)
	}
	return out
}

// decode turns a document into a typed object, refusing unknown fields.
func decode(u *unstructured.Unstructured, into any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("decoding %s: %w", u.GetKind(), err)
	}
	return nil
}

// fill sets what the API server would: namespace, and a UID placeholder
// (rendered owner references need one).
func fill(m *metav1.ObjectMeta, ns string) {
	m.Namespace = ns
	if m.UID == "" {
		m.UID = render.PlaceholderUID
	}
	if m.Generation == 0 {
		m.Generation = 1
	}
}
