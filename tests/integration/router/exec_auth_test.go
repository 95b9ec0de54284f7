package router

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/tests"
)

// saToken makes ServiceAccount name in ns and returns a token of it.
func saToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := ctxFor(t)
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	tr, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bind binds ServiceAccount sa of ns to a role (kind Role or ClusterRole) in ns.
func bind(t *testing.T, ns, sa, kind, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-" + strings.ToLower(kind) + "-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	if err := env.Client.Create(ctxFor(t), rb); err != nil {
		t.Fatal(err)
	}
}

// mayExec asks the API server (as admin) whether sa of ns may create
// sandboxes/exec on the Sandbox ns/name.
func mayExec(t *testing.T, ns, sa, name string) bool {
	t.Helper()
	sar, err := kubernetes.NewForConfigOrDie(env.Config).AuthorizationV1().SubjectAccessReviews().Create(ctxFor(t), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + ns + ":" + sa, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Name: name, Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes", Subresource: "exec"}},
	}, metav1.CreateOptions{})
	return err == nil && sar.Status.Allowed
}

// shippedExecRole is config/rbac/sandbox_exec_role.yaml.
func shippedExecRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "rbac", "sandbox_exec_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(raw, role); err != nil {
		t.Fatal(err)
	}
	return role
}

// reviewCounter counts the TokenReviews and SubjectAccessReviews sent
// through a config.
type reviewCounter struct{ tokens, accesses atomic.Int64 }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *reviewCounter) client(cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost {
				switch {
				case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
					c.tokens.Add(1)
				case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
					c.accesses.Add(1)
				}
			}
			return rt.RoundTrip(r)
		})
	})
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestReadingIsNotRunning: the router authorizes like pods/exec. A user
// who may read Sandboxes (the built-in view role, or a Role with get, list
// and watch on sandboxes: auditors, backup and GitOps tools) is refused; a
// user bound to the shipped agent-sandbox-exec ClusterRole goes through.
// (The role aggregates to edit and admin; envtest runs no aggregation
// controller, so the labels are checked here and the aggregation itself on
// the local cluster.) Refusals are cached: the same made-up token, or the
// same denied access, is reviewed once.
func TestReadingIsNotRunning(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	port := backend(t)
	sb := createSandbox(t, ns, "box", nil, nil, nil)
	createPod(t, sb, "box", "127.0.0.1")

	role := shippedExecRole(t)
	if l := role.Labels; l["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" || l["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" ||
		l["rbac.authorization.k8s.io/aggregate-to-view"] != "" {
		t.Errorf("agent-sandbox-exec aggregates by %v, want to edit and admin and never to view", l)
	}
	role.Name = "agent-sandbox-exec-" + ns // cluster-scoped: one per test
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sandbox-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes"}, Verbs: []string{"get", "list", "watch"}}}}
	for _, obj := range []client.Object{role, reader} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })
	auditor, viewer, editor := saToken(t, ns, "auditor"), saToken(t, ns, "viewer"), saToken(t, ns, "editor")
	bind(t, ns, "auditor", "Role", reader.Name)
	bind(t, ns, "viewer", "ClusterRole", "view")
	bind(t, ns, "viewer", "Role", reader.Name)
	bind(t, ns, "editor", "ClusterRole", role.Name)
	waitUntil(t, 10*time.Second, "the editor's binding is in force", func() bool { return mayExec(t, ns, "editor", "box") })

	identity := routerIdentity(t, ns)
	var counted reviewCounter
	url, _ := startRouter(t, identity, router.CacheOptions{Namespaces: []string{ns}}, func(o *router.Options) {
		o.Authorizer = router.NewTokenReview(counted.client(identity), router.TokenReviewOptions{
			CacheTTL: time.Minute, RefusalTTL: time.Minute, Metrics: o.Metrics})
	})
	headers := func(token string) map[string]string {
		return map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port, "Authorization": "Bearer " + token}
	}
	for name, token := range map[string]string{"auditor": auditor, "viewer": viewer} {
		if code, body := call(t, url, headers(token)); code != http.StatusForbidden || !strings.Contains(body, "may not create sandboxes/exec.agents.x-k8s.io "+ns+"/box") {
			t.Errorf("%s (may read the Sandbox): %d %s, want 403", name, code, body)
		}
	}
	if code, body := call(t, url, headers(editor)); code != http.StatusOK || body != "sandbox saw /list/work auth=" {
		t.Errorf("editor (agent-sandbox-exec): %d %s, want 200", code, body)
	}

	// Refusals are cached: each asked once more, no review is sent.
	tokens, accesses := counted.tokens.Load(), counted.accesses.Load()
	for range 5 {
		if code, _ := call(t, url, headers(viewer)); code != http.StatusForbidden {
			t.Errorf("viewer again: %d", code)
		}
	}
	if d := counted.accesses.Load() - accesses; d != 0 {
		t.Errorf("a denied access was reviewed %d more times, want 0 (cached)", d)
	}
	for range 5 {
		if code, _ := call(t, url, headers("made-up-token")); code != http.StatusUnauthorized {
			t.Errorf("a made-up token: %d", code)
		}
	}
	if d := counted.tokens.Load() - tokens; d != 1 {
		t.Errorf("a made-up token asked 5 times was reviewed %d times, want 1", d)
	}
}

// TestShippedRolesNeverAggregateExecToView: nothing under config/ grants
// sandboxes/exec (or every resource of the group) to a role that
// aggregates to view.
func TestShippedRolesNeverAggregateExecToView(t *testing.T) {
	err := filepath.WalkDir(filepath.Join(tests.RepoRoot(), "config"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var role rbacv1.ClusterRole
			if yaml.Unmarshal([]byte(doc), &role) != nil || role.Kind != "ClusterRole" || role.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
				continue
			}
			for _, r := range role.Rules {
				if (slices.Contains(r.APIGroups, sandboxv1beta1.GroupName) || slices.Contains(r.APIGroups, "*")) &&
					(slices.Contains(r.Resources, "sandboxes/exec") || slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "sandboxes/*")) {
					t.Errorf("%s: ClusterRole %s aggregates to view and grants %v", path, role.Name, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestJunkTokensDoNotStarveCallers: a flood of made-up tokens is reviewed
// within the budget of new tokens (the rest refused 429 without asking the
// API server), while a caller whose token the router has seen authenticated
// keeps getting through, reviewed every time (no positive cache here) from
// the budget junk never reaches.
func TestJunkTokensDoNotStarveCallers(t *testing.T) {
	ns := env.Namespace(t)
	port := backend(t)
	sb := createSandbox(t, ns, "box", nil, nil, nil)
	createPod(t, sb, "box", "127.0.0.1")
	role := shippedExecRole(t)
	role.Name = "agent-sandbox-exec-" + ns
	if err := env.Client.Create(ctxFor(t), role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })
	user := saToken(t, ns, "user")
	bind(t, ns, "user", "ClusterRole", role.Name)
	waitUntil(t, 10*time.Second, "the user's binding is in force", func() bool { return mayExec(t, ns, "user", "box") })

	const qps, burst = 5, 5
	identity := routerIdentity(t, ns)
	var counted reviewCounter
	url, reg := startRouter(t, identity, router.CacheOptions{Namespaces: []string{ns}}, func(o *router.Options) {
		o.Authorizer = router.NewTokenReview(counted.client(identity), router.TokenReviewOptions{Metrics: o.Metrics,
			Budget: router.NewReviewBudget(router.ReviewBudgetOptions{NewTokenQPS: qps, NewTokenBurst: burst, SourceQPS: qps, SourceBurst: burst})})
	})
	headers := func(token string) map[string]string {
		return map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port, "Authorization": "Bearer " + token}
	}
	if code, body := call(t, url, headers(user)); code != http.StatusOK {
		t.Fatalf("the user before the flood: %d %s", code, body)
	}
	tokensBefore := counted.tokens.Load()

	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var junk, throttled atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, _ := call(t, url, headers(fmt.Sprintf("junk-%d-%d", w, i)))
				junk.Add(1)
				if code == http.StatusTooManyRequests {
					throttled.Add(1)
				} else if code != http.StatusUnauthorized {
					t.Errorf("a made-up token: %d", code)
				}
			}
		})
	}
	var slowest time.Duration
	for range 20 {
		began := time.Now()
		if code, body := call(t, url, headers(user)); code != http.StatusOK {
			t.Errorf("the user during the flood: %d %s", code, body)
		}
		slowest = max(slowest, time.Since(began))
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	// The user's 20 requests were each reviewed; junk at most within the budget.
	junkReviews := counted.tokens.Load() - tokensBefore - 20
	if limit := int64(burst + qps*elapsed.Seconds() + 1); junkReviews > limit {
		t.Errorf("%d TokenReviews of made-up tokens in %s, want at most %d (the budget)", junkReviews, elapsed.Round(time.Millisecond), limit)
	}
	if throttled.Load() == 0 || junk.Load() <= junkReviews {
		t.Errorf("%d made-up tokens sent, %d refused 429: the budget held nothing back", junk.Load(), throttled.Load())
	}
	if slowest > 2*time.Second {
		t.Errorf("the user's slowest request during the flood took %s", slowest)
	}
	if n := counter(t, reg, "sandbox_router_auth_failures_total", "reason", router.ReasonThrottled); n != float64(throttled.Load()) {
		t.Errorf("auth_throttled refusals counted: %v, want %d", n, throttled.Load())
	}
	t.Logf("%d made-up tokens in %s: %d reviewed, %d refused 429; the user's slowest request %s", junk.Load(), elapsed.Round(time.Millisecond),
		junkReviews, throttled.Load(), slowest.Round(time.Millisecond))
}

// TestWatchesOnlySandboxPods: the router's cache lists and watches only
// Pods with the sandbox-name-hash label the controller puts on every
// sandbox Pod; a Pod without it is not seen, even one named after a
// Sandbox and controlled by it.
func TestWatchesOnlySandboxPods(t *testing.T) {
	ns := env.Namespace(t)
	port := backend(t)
	sb := createSandbox(t, ns, "box", nil, nil, nil)
	p := createPod(t, sb, "box", "127.0.0.1")
	other := createSandbox(t, ns, "unlabelled", nil, nil, nil)
	q := createPod(t, other, "unlabelled", "127.0.0.1")
	delete(q.Labels, sandboxv1beta1.LabelSandboxNameHash)
	if err := env.Client.Update(ctxFor(t), q); err != nil {
		t.Fatal(err)
	}
	url, _ := startRouter(t, routerIdentity(t, ns), router.CacheOptions{}, nil)
	h := func(id string) map[string]string {
		return map[string]string{"X-Sandbox-ID": id, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port}
	}
	if code, body := call(t, url, h("box")); code != http.StatusOK {
		t.Errorf("a labelled sandbox Pod: %d %s", code, body)
	}
	if code, body := call(t, url, h("unlabelled")); code != http.StatusConflict || !strings.Contains(body, "it has no pod") {
		t.Errorf("a Pod without the label: %d %s, want 409 (no pod)", code, body)
	}
	_ = p
}
