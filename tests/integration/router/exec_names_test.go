package router

import (
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// TestExecByNameOnly plays a user whose Role lets him exec into one
// Sandbox by name (resourceNames) against the router's question about all
// names of a namespace, with the API server's own RBAC: he reaches his
// Sandbox and never his neighbour's, while a user with the whole namespace
// reaches several new Sandboxes for one SubjectAccessReview.
func TestExecByNameOnly(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	port := backend(t)
	for _, name := range []string{"his-box", "her-box", "her-other-box"} {
		createPod(t, createSandbox(t, ns, name, nil, nil, nil), name, "127.0.0.1")
	}
	narrow := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-his-box"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"},
			Verbs: []string{"create"}, ResourceNames: []string{"his-box"}}}}
	wide := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-all"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}}}}
	for _, r := range []*rbacv1.Role{narrow, wide} {
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	him, her := saToken(t, ns, "him"), saToken(t, ns, "her")
	bind(t, ns, "him", "Role", narrow.Name)
	bind(t, ns, "her", "Role", wide.Name)
	waitUntil(t, 10*time.Second, "the bindings are in force", func() bool { return mayExec(t, ns, "him", "his-box") && mayExec(t, ns, "her", "her-box") })

	identity := routerIdentity(t, ns)
	var counted reviewCounter
	url, _ := startRouter(t, identity, router.CacheOptions{Namespaces: []string{ns}}, func(o *router.Options) {
		o.Authorizer = router.NewTokenReview(counted.client(identity), router.TokenReviewOptions{CacheTTL: time.Minute, Metrics: o.Metrics})
	})
	reach := func(token, sandbox string, want int) {
		t.Helper()
		h := map[string]string{"X-Sandbox-ID": sandbox, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port, "Authorization": "Bearer " + token}
		code, body := call(t, url, h)
		if code != want {
			t.Errorf("%s: %d %s, want %d", sandbox, code, body, want)
		}
		if want == http.StatusForbidden && !strings.Contains(body, "may not create sandboxes/exec.agents.x-k8s.io "+ns+"/"+sandbox) {
			t.Errorf("%s: refused with %q", sandbox, body)
		}
	}

	// Her Role covers every name: one review for three Sandboxes.
	before := counted.accesses.Load()
	for _, sb := range []string{"her-box", "her-other-box", "his-box"} {
		reach(her, sb, http.StatusOK)
	}
	if d := counted.accesses.Load() - before; d != 1 {
		t.Errorf("a user with the whole namespace, into 3 new Sandboxes: %d SubjectAccessReviews, want 1", d)
	}
	// His covers one name: all names is no, so each is asked by name.
	reach(him, "her-box", http.StatusForbidden)
	reach(him, "his-box", http.StatusOK)
	reach(him, "her-other-box", http.StatusForbidden)
	reach(him, "her-box", http.StatusForbidden)
}
