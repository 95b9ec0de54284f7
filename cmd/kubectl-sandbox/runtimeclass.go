package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// defaultsFor are the defaults sb's Pod is rendered with. They are
// resolved (and reported on stderr) only for a Pod that needs them: one
// whose template names no runtime class.
func (o *options) defaultsFor(sb *sandboxv1beta1.Sandbox, docs []document) render.Defaults {
	if sb.Spec.PodTemplate.Spec.RuntimeClassName != nil {
		return render.Defaults{}
	}
	return o.runtimeDefaults(docs)
}

// runtimeDefaults resolves --default-runtime-class as the controller does
// and says on stderr which default the command renders with, once. Under
// auto the cluster is, offline, the RuntimeClass objects among the
// manifests when there are any; else the cluster the command talks to
// (diff, --from-cluster); else one assumed to have the first isolating
// class (gvisor).
func (o *options) runtimeDefaults(docs []document) render.Defaults {
	if o.defaults != nil {
		return *o.defaults
	}
	isolating := policy.IsolatingRuntimeClasses()
	setting := o.defaultRuntime
	var class, from string
	switch setting {
	case runtimeclass.None, "":
		from = "--default-runtime-class=none"
	case runtimeclass.Auto:
		if names, ok := manifestRuntimeClasses(docs); ok {
			from = "the RuntimeClasses in the manifests"
			class = runtimeclass.Resolve(setting, isolating, names)
			break
		}
		if o.runtimeClasses != nil {
			names, err := o.runtimeClasses()
			if err == nil {
				from = "the cluster's RuntimeClasses"
				class = runtimeclass.Resolve(setting, isolating, names)
				break
			}
			o.note("cannot list the cluster's RuntimeClasses (%v)", err)
		}
		from = "no RuntimeClass in the manifests: assuming the cluster has the first isolating class"
		class = isolating[0]
	default:
		class, from = setting, "--default-runtime-class"
		if !slices.Contains(isolating, class) {
			from += "; not an isolating class: runtime-isolation refuses the Pods that get it"
		}
	}
	switch {
	case class != "":
		o.note("default runtime class %s (%s)", class, from)
	case setting == runtimeclass.Auto:
		o.note("no default runtime class: none of %s among %s", strings.Join(isolating, ", "), from)
	default:
		o.note("no default runtime class (%s)", from)
	}
	o.defaults = &render.Defaults{RuntimeClassName: class}
	return *o.defaults
}

// note writes one line about the command's inputs on stderr.
func (o *options) note(format string, args ...any) {
	if o.stderr != nil {
		_, _ = fmt.Fprintf(o.stderr, "kubectl-sandbox: "+format+"\n", args...)
	}
}

// manifestRuntimeClasses lists the RuntimeClass objects among the
// documents; ok reports there are any.
func manifestRuntimeClasses(docs []document) (names []string, ok bool) {
	for _, d := range docs {
		gvk := d.Obj.GroupVersionKind()
		if gvk.Group == nodev1.GroupName && gvk.Kind == "RuntimeClass" {
			names, ok = append(names, d.Obj.GetName()), true
		}
	}
	return names, ok
}

// clusterRuntimeClasses lists the RuntimeClasses of a cluster.
func clusterRuntimeClasses(c client.Client) func() ([]string, error) {
	return func() ([]string, error) {
		var list nodev1.RuntimeClassList
		if err := c.List(context.Background(), &list); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(list.Items))
		for _, rc := range list.Items {
			names = append(names, rc.Name)
		}
		return names, nil
	}
}
