package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// TestRoutesThroughTheCache: the router, with the deploy bundle's RBAC,
// resolves Sandboxes and Pods from its cache and proxies to the Pod's IP
// (127.0.0.1, allowed for the test); it follows the cluster as Pods turn
// Ready, warm members are claimed and Sandboxes go.
func TestRoutesThroughTheCache(t *testing.T) {
	ns := env.Namespace(t)
	port := backend(t)
	ext := extv1beta1.GroupVersion.String()

	standalone := createSandbox(t, ns, "standalone", nil, nil, nil)
	createPod(t, standalone, "standalone", "127.0.0.1")
	// A claimed member keeps its Pod, named by the pod-name annotation.
	claimed := createSandbox(t, ns, "claimed", controller(ext, "SandboxClaim", "my-claim"), nil,
		map[string]string{sandboxv1beta1.AnnotationPodName: "pool-x7k2p"})
	createPod(t, claimed, "pool-x7k2p", "127.0.0.1")
	warm := createSandbox(t, ns, "pool-b4c9d", controller(ext, "SandboxWarmPool", "pool"),
		map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd1234"}, nil)
	warmPod := createPod(t, warm, "pool-b4c9d", "127.0.0.1")
	starting := createSandbox(t, ns, "starting", nil, nil, nil)
	startingPod := createPod(t, starting, "starting", "")
	podless := createSandbox(t, ns, "suspended", nil, nil, nil)
	_ = podless

	url, reg := startRouter(t, routerIdentity(t, ns), router.CacheOptions{}, nil)
	headers := func(id string) map[string]string {
		return map[string]string{"X-Sandbox-ID": id, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port, "Authorization": "Bearer not-for-the-sandbox"}
	}
	var wg sync.WaitGroup // refusals wait out --resolve-wait: ask at once
	for id, want := range map[string]int{
		"standalone": http.StatusOK, "claimed": http.StatusOK,
		"pool-b4c9d": http.StatusForbidden, "starting": http.StatusConflict, "suspended": http.StatusConflict, "missing": http.StatusNotFound,
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := call(t, url, headers(id))
			switch {
			case code != want:
				t.Errorf("%s: %d %s, want %d", id, code, body, want)
			case code == http.StatusOK && body != "sandbox saw /list/work auth=":
				t.Errorf("%s: the sandbox answered %q (Authorization must not reach it)", id, body)
			case code != http.StatusOK:
				var e struct{ Detail string }
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Detail == "" {
					t.Errorf("%s: body %q is not {\"detail\": ...}", id, body)
				}
			}
		}()
	}
	wg.Wait()
	if n := counter(t, reg, "sandbox_router_resolution_failures_total", "reason", router.ReasonWarmMember); n != 1 {
		t.Errorf("warm member refusals counted: %v", n)
	}

	// The UID of an earlier Sandbox of the same name is refused: to that
	// handle the Sandbox is gone.
	stale := headers("standalone")
	stale["X-Sandbox-UID"] = "6d1c1a8e-0000-4000-8000-000000000000"
	if code, body := call(t, url, stale); code != http.StatusNotFound {
		t.Errorf("a stale X-Sandbox-UID: %d %s", code, body)
	}
	current := headers("standalone")
	current["X-Sandbox-UID"] = string(standalone.UID)
	if code, body := call(t, url, current); code != http.StatusOK {
		t.Errorf("the current X-Sandbox-UID: %d %s", code, body)
	}

	// The Pod turns Ready: the router follows within its resolve wait.
	setReady(t, startingPod, "127.0.0.1")
	if code, body := call(t, url, headers("starting")); code != http.StatusOK {
		t.Errorf("a Pod just Ready: %d %s", code, body)
	}

	// A claim takes the warm member, as the controller does: ownership to
	// the claim and the pool label gone, in one write. The Pod still has
	// the pool label for a moment; the Sandbox is what counts.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null},"ownerReferences":[{"apiVersion":%q,"kind":"SandboxClaim","name":"c2","uid":"c2-uid","controller":true}]}}`,
		sandboxv1beta1.LabelWarmPoolSandbox, ext)
	if err := env.Client.Patch(context.Background(), warm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, url, headers("pool-b4c9d")); code != http.StatusOK {
		t.Errorf("a member just claimed: %d %s", code, body)
	}
	_ = warmPod

	// The Sandbox goes: 404 (its Pod may linger; no GC runs here).
	if err := env.Client.Delete(context.Background(), standalone); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the router sees the Sandbox gone", func() bool {
		code, _ := call(t, url, headers("standalone"))
		return code == http.StatusNotFound
	})
}

// TestTokenReviewAuth: with --auth=tokenreview, a ServiceAccount token the
// API server authenticates, whose user may create sandboxes/exec on the
// Sandbox, goes through; others get 401 or 403. The router itself runs with the deploy bundle's
// RBAC (it may create TokenReviews and SubjectAccessReviews) and watches
// one namespace only.
func TestTokenReviewAuth(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	port := backend(t)
	sb := createSandbox(t, ns, "box", nil, nil, nil)
	createPod(t, sb, "box", "127.0.0.1")

	identity := routerIdentity(t, ns)
	routerClient, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	url, reg := startRouter(t, identity, router.CacheOptions{Namespaces: []string{ns}}, func(o *router.Options) {
		o.Authorizer = router.NewTokenReview(routerClient, router.TokenReviewOptions{CacheTTL: 10 * time.Second})
	})

	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(name string) string {
		t.Helper()
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	alice, bob := token("alice"), token("bob")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sandbox-user"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-uses-sandboxes"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "alice"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	headers := func(bearer string) map[string]string {
		h := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port}
		if bearer != "" {
			h["Authorization"] = "Bearer " + bearer
		}
		return h
	}
	if code, body := call(t, url, headers("")); code != http.StatusUnauthorized || !strings.Contains(body, "Missing or invalid Authorization header.") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := call(t, url, headers("made-up")); code != http.StatusUnauthorized || !strings.Contains(body, "Invalid token.") {
		t.Errorf("a made-up token: %d %s", code, body)
	}
	if code, body := call(t, url, headers(bob)); code != http.StatusForbidden || !strings.Contains(body, ":bob\\\" may not create sandboxes/exec.agents.x-k8s.io") {
		t.Errorf("a user without create sandboxes/exec on the Sandbox: %d %s", code, body)
	}
	// Alice's Role may take a moment to reach the API server's authorizer
	// (refusals are not cached by the router).
	waitUntil(t, 10*time.Second, "alice's request goes through", func() bool {
		code, body := call(t, url, headers(alice))
		return code == http.StatusOK && body == "sandbox saw /list/work auth="
	})
	if n := counter(t, reg, "sandbox_router_auth_failures_total", "reason", router.ReasonForbidden); n < 1 {
		t.Errorf("403s counted: %v", n)
	}
	// A Sandbox in a namespace the router does not watch is unknown to it,
	// even to a user who may get it.
	other := env.Namespace(t)
	osb := createSandbox(t, other, "box", nil, nil, nil)
	createPod(t, osb, "box", "127.0.0.1")
	for _, obj := range []client.Object{role.DeepCopy(), binding.DeepCopy()} {
		obj.SetNamespace(other)
		obj.SetResourceVersion("")
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	h := headers(alice)
	h["X-Sandbox-Namespace"] = other
	waitUntil(t, 10*time.Second, "alice may create sandboxes/exec in the other namespace", func() bool {
		code, _ := call(t, url, h)
		return code != http.StatusForbidden
	})
	if code, body := call(t, url, h); code != http.StatusNotFound {
		t.Errorf("a Sandbox outside the router's namespaces: %d %s, want 404", code, body)
	}
}
