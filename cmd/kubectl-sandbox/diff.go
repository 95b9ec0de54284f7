package main

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/api/convert"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
)

// Field managers the diff previews as: the user's apply, and the
// controller's apply of what it renders.
const (
	userFieldManager       = "kubectl-sandbox"
	controllerFieldManager = "agent-sandbox-controller"
)

// clusterClient builds a client from kubectl's flags (--kubeconfig,
// --context, --server, --token, --as, ...; else the usual KUBECONFIG /
// in-cluster rules).
func clusterClient(o *options) (client.Client, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, &inputError{fmt.Sprintf("no cluster to diff against: %v", err)}
	}
	return client.New(cfg, client.Options{})
}

// runDiff shows what applying the manifests would change: each object,
// through a server-side dry-run apply, and the children the controller
// would render from it. Exit 1 when anything would change (or be refused).
func runDiff(o *options, stdin io.Reader, stdout io.Writer) (int, error) {
	docs, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return 0, err
	}
	c, err := clusterClient(o)
	if err != nil {
		return 0, err
	}
	holder, err := loadPolicies(o, clusterNamespaceLabels(c))
	if err != nil {
		return 0, err
	}
	set := holder.Get()
	ctx := context.Background()
	changed := false
	for _, d := range docs {
		if d.Obj.GetNamespace() == "" {
			d.Obj.SetNamespace(o.namespace)
		}
		// Children are owned by the live object: render with its UID.
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(d.Obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(d.Obj), live); err == nil {
			d.Obj.SetUID(live.GetUID())
		}
	}
	o.lookup, o.runtimeClasses = clusterLookup(c), clusterRuntimeClasses(c)
	for _, r := range renderAll(o, docs) {
		obj := r.doc.Obj
		name := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		live, after, err := ssa.DryRunApply(ctx, c, obj, userFieldManager)
		if err != nil {
			_, _ = fmt.Fprintf(stdout, "# %s: %s: the API server refuses it: %v\n", r.doc.where(), name, err)
			changed = true
			continue
		}
		if d := ssa.DiffObjects(name, live, after); d != "" {
			_, _ = fmt.Fprint(stdout, d)
			changed = true
		}
		if r.problem != "" {
			_, _ = fmt.Fprintf(stdout, "# %s: %s: children not rendered: %s\n", r.doc.where(), name, r.problem)
			continue
		}
		for i, child := range r.objects {
			if _, passthrough := child.(*unstructured.Unstructured); passthrough {
				continue
			}
			inNS, _ := holder.In(ctx, obj.GetNamespace())
			ds, err := set.CheckAs(inNS, r.gvks[i], child)
			if err != nil {
				return 0, err
			}
			for _, dec := range policy.Denied(ds) {
				_, _ = fmt.Fprintf(stdout, "# %s: %s would be refused: %s\n", r.doc.where(), dec.Object, dec.String())
				changed = true
			}
			u, err := convert.Unstructured(child)
			if err != nil {
				return 0, err
			}
			u.SetGroupVersionKind(r.gvks[i])
			cname := fmt.Sprintf("%s %s/%s (rendered from %s)", u.GetKind(), u.GetNamespace(), u.GetName(), name)
			if u.GetKind() == "Pod" {
				// A running Pod keeps its spec; only its metadata follows.
				cur := &unstructured.Unstructured{}
				cur.SetGroupVersionKind(r.gvks[i])
				if err := c.Get(ctx, client.ObjectKeyFromObject(u), cur); err == nil {
					u.Object["spec"] = cur.Object["spec"]
				}
			}
			live, after, err := ssa.DryRunApply(ctx, c, u, controllerFieldManager)
			if err != nil {
				_, _ = fmt.Fprintf(stdout, "# %s: the API server refuses it: %v\n", cname, err)
				changed = true
				continue
			}
			if d := ssa.DiffObjects(cname, live, after); d != "" {
				_, _ = fmt.Fprint(stdout, d)
				changed = true
			}
		}
	}
	if changed {
		return exitFindings, nil
	}
	return exitOK, nil
}

// clusterLookup finds pools and templates in the cluster.
func clusterLookup(c client.Client) func(kind, namespace, name string, into any) bool {
	return func(kind, namespace, name string, into any) bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("extensions.agents.x-k8s.io/v1beta1")
		u.SetKind(kind)
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return false
		}
		return decode(u, into) == nil
	}
}

// clusterNamespaceLabels reads a namespace's labels from the cluster, so
// the policy modes are the ones the webhook would use (nil when it cannot:
// the defaults apply).
func clusterNamespaceLabels(c client.Client) func(context.Context, string) map[string]string {
	return func(ctx context.Context, ns string) map[string]string {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, m); err != nil {
			return nil
		}
		return m.Labels
	}
}
