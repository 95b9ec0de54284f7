package router

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

// installNamespacedRouterRBAC creates config/router/namespaced/rbac.yaml in
// ns, as kustomize's namespace transformer (make deploy-router-namespace)
// does: every object and the RoleBinding's ServiceAccount subject in ns.
func installNamespacedRouterRBAC(t *testing.T, ns string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "router", "namespaced", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var probe metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			t.Fatal(err)
		}
		var obj client.Object
		switch probe.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		default:
			t.Fatalf("config/router/namespaced/rbac.yaml: unexpected %s (a namespace's router has no cluster-wide rights)", probe.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace(ns)
		if rb, ok := obj.(*rbacv1.RoleBinding); ok {
			for i := range rb.Subjects {
				rb.Subjects[i].Namespace = ns
			}
		}
		if err := env.Client.Create(ctxFor(t), obj); err != nil {
			t.Fatal(err)
		}
		kinds[probe.Kind] = true
	}
	if len(kinds) != 3 {
		t.Fatalf("config/router/namespaced/rbac.yaml has %v, want a ServiceAccount, a Role and a RoleBinding", kinds)
	}
}

// TestNamespacedRouterRBAC: a namespace's router (config/router/namespaced)
// may do what it needs in its own namespace (its cache, its port-forward
// transport, resume and activity writes, events) and nothing anywhere
// else: no other namespace's Pods, Sandboxes or port-forwards, no Secrets,
// no exec, no Pods of its own making, no TokenReviews or
// SubjectAccessReviews. A tenant who can port-forward to it must not gain
// more than that namespace.
func TestNamespacedRouterRBAC(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	installNamespacedRouterRBAC(t, ns)
	user := "system:serviceaccount:" + ns + ":sandbox-router"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	review := func(attrs authorizationv1.ResourceAttributes) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: &attrs}}
		if err := env.Client.Create(ctxFor(t), sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	// The API server's RBAC authorizer reads bindings from an informer: a
	// binding just created may take a moment to count (seen on a loaded CI
	// machine). Wait until the first grant holds, then check every row.
	deadline := time.Now().Add(30 * time.Second)
	for !review(authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}) {
		if time.Now().After(deadline) {
			t.Fatalf("%s list pods in %q: not allowed 30s after the RoleBinding was created", user, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		attrs   authorizationv1.ResourceAttributes
		allowed bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Resource: "pods"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "portforward"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "portforward"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Group: "agents.x-k8s.io", Resource: "sandboxes"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: "agents.x-k8s.io", Resource: "sandboxes"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "events.k8s.io", Resource: "events"}, true},

		{authorizationv1.ResourceAttributes{Namespace: other, Verb: "list", Resource: "pods"}, false},
		{authorizationv1.ResourceAttributes{Namespace: other, Verb: "create", Resource: "pods", Subresource: "portforward"}, false},
		{authorizationv1.ResourceAttributes{Namespace: other, Verb: "list", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Namespace: other, Verb: "patch", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, false}, // cluster-wide
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes", Subresource: "exec"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, false},
	} {
		attrs := c.attrs
		if allowed := review(attrs); allowed != c.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed %v, want %v", user, attrs.Verb, attrs.Resource, attrs.Subresource, attrs.Namespace, allowed, c.allowed)
		}
	}
}
