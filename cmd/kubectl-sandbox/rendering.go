package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/render/preview"
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

// renderAll renders every document with preview, the rendering the
// webhook shares. Claims and pools find their pool and template among the
// documents, then (--from-cluster, diff) in the cluster.
func renderAll(o *options, docs []document) []rendering {
	docs = hubVersions(docs)
	ns := func(u *unstructured.Unstructured) string {
		if u.GetNamespace() != "" {
			return u.GetNamespace()
		}
		return o.namespace
	}
	found := &manifestLookup{o: o, templates: map[string]*extv1beta1.SandboxTemplate{}, pools: map[string]*extv1beta1.SandboxWarmPool{}}
	for _, d := range docs {
		switch d.Obj.GetKind() {
		case "SandboxTemplate":
			t := &extv1beta1.SandboxTemplate{}
			if decode(d.Obj, t) == nil {
				t.Namespace = ns(d.Obj)
				found.templates[t.Namespace+"/"+t.Name] = t
			}
		case "SandboxWarmPool":
			p := &extv1beta1.SandboxWarmPool{}
			if decode(d.Obj, p) == nil {
				p.Namespace = ns(d.Obj)
				found.pools[p.Namespace+"/"+p.Name] = p
			}
		}
	}
	defaults := func(sb *sandboxv1beta1.Sandbox) render.Defaults { return o.defaultsFor(sb, docs) }
	out := make([]rendering, 0, len(docs))
	for _, d := range docs {
		r := rendering{doc: d}
		obj, err := hubObject(d.Obj)
		switch {
		case err != nil:
			r.problem = err.Error()
		case obj == nil:
			// Not ours: passed through untouched.
			r.objects = append(r.objects, d.Obj)
			r.gvks = append(r.gvks, d.Obj.GroupVersionKind())
		default:
			preview.Fill(obj, ns(d.Obj), "")
			p, err := preview.Render(preview.Inputs{Object: obj, Lookup: found, Defaults: defaults,
				ControllerNamespace: o.controllerNS, Members: true})
			switch {
			case err != nil:
				r.problem = err.Error()
			case p.Missing != nil:
				r.problem, r.missing = missingNote(o, d.Obj.GetKind(), p.Missing), true
			}
			for _, m := range p.Made {
				r.objects, r.gvks = append(r.objects, m.Object), append(r.gvks, m.GVK)
			}
			for _, m := range p.Member {
				r.checks, r.checkGVKs = append(r.checks, m.Object), append(r.checkGVKs, m.GVK)
			}
		}
		out = append(out, r)
	}
	return out
}

// hubObject decodes a document of ours at v1beta1 (nil for anything else).
func hubObject(u *unstructured.Unstructured) (convert.Object, error) {
	kind := u.GetKind()
	if u.GetAPIVersion() != convert.Hub(kind).String() {
		return nil, nil
	}
	obj := convert.NewHub(kind)
	if obj == nil {
		return nil, nil
	}
	if err := decode(u, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// missingNote says which pool or template is missing and what could not
// be rendered for it.
func missingNote(o *options, kind string, m *preview.Missing) string {
	where := " nor in the cluster"
	if o.lookup == nil {
		where = " (add it, or use --from-cluster)"
	}
	switch {
	case kind == "SandboxWarmPool":
		return fmt.Sprintf("%s %s is not among the manifests%s; its members cannot be rendered", m.Kind, m.Name, where)
	case m.Pool != "":
		return fmt.Sprintf("%s %s (of pool %s) is not among the manifests%s; the claim cannot be rendered", m.Kind, m.Name, m.Pool, where)
	}
	return fmt.Sprintf("%s %s is not among the manifests%s; the claim cannot be rendered", m.Kind, m.Name, where)
}

// manifestLookup finds pools and templates among the manifests, then
// through o.lookup (the cluster) when set.
type manifestLookup struct {
	o         *options
	templates map[string]*extv1beta1.SandboxTemplate
	pools     map[string]*extv1beta1.SandboxWarmPool
}

func (l *manifestLookup) Template(namespace, name string) (*extv1beta1.SandboxTemplate, error) {
	if t := l.templates[namespace+"/"+name]; t != nil {
		return t, nil
	}
	return lookupTemplate(l.o, namespace, name), nil
}

func (l *manifestLookup) Pool(namespace, name string) (*extv1beta1.SandboxWarmPool, error) {
	if p := l.pools[namespace+"/"+name]; p != nil {
		return p, nil
	}
	p := &extv1beta1.SandboxWarmPool{}
	if l.o.lookup == nil || !l.o.lookup("SandboxWarmPool", namespace, name, p) {
		return nil, nil
	}
	return p, nil
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

// hubVersions returns the documents with deprecated v1alpha1 objects
// converted to v1beta1 (api/convert, as the API server stores them), so
// everything below renders one version. A document that does not convert
// is left as it is.
func hubVersions(docs []document) []document {
	out := make([]document, 0, len(docs))
	for _, d := range docs {
		kind, from := d.Obj.GetKind(), d.Obj.GetAPIVersion()
		if to := convert.Hub(kind).String(); from != to && convert.Known(kind, from, to) {
			if raw, err := d.Obj.MarshalJSON(); err == nil {
				if hub, err := convert.BetweenStrict(kind, from, to, raw); err == nil {
					if u, err := convert.Unstructured(hub); err == nil {
						d.Obj = u
					}
				}
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
