package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/e2b"
)

// TestE2BSDK runs the unmodified e2b SDK from npm (the version
// tests/e2b/package-lock.json pins, installed with npm ci) against the
// router's E2B front door, started as `make run` starts it: sdk.mjs
// creates a sandbox from a warm pool, runs commands (output, exit codes,
// stdin, kill), uses the files API and watchDir, pauses and connects (the
// file survives), moves the timeout, lists by metadata, kills, and checks
// that a wrong access token is refused and that an unknown id's kill
// answers false. Every step must pass. It runs twice: with make run's
// credentials (any non-empty key; the sandboxes in the router's
// --e2b-namespace) and with --e2b-auth=tokenreview, the key being a
// ServiceAccount token whose namespace holds the pool. Without Node.js it
// skips, saying why.
func TestE2BSDK(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	if err := e2b.Available(); err != nil {
		t.Skipf("skipping the e2b SDK test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := e2b.Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)

	t.Run("make-run", func(t *testing.T) {
		ns := namespace(t, c)
		e2bPool(t, c, ns)
		r := startRouter(t, "--e2b-namespace="+ns)
		runSDK(ctx, t, dir, e2b.Env{APIURL: r.URL, SandboxURL: r.URL, APIKey: "any-non-empty-key"})
	})

	t.Run("tokenreview", func(t *testing.T) {
		ns := namespace(t, c)
		e2bPool(t, c, ns)
		token := e2bAgent(ctx, t, c, ns)
		r := startRouter(t, "--e2b-auth=tokenreview")
		runSDK(ctx, t, dir, e2b.Env{APIURL: r.URL, SandboxURL: r.URL, APIKey: token})
	})
}

// runSDK runs sdk.mjs on the pool "python-pool" and fails the test for
// every step that failed (or a script that died half-way).
func runSDK(ctx context.Context, t *testing.T, dir string, env e2b.Env) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	stdout, stderr, runErr := e2b.Run(rctx, dir, env, "sdk.mjs", "python-pool")
	steps, sum, err := e2b.ParseSteps(stdout)
	for _, s := range steps {
		if s.OK {
			t.Logf("%-28s ok   %8.1f ms  %s", s.Step, s.Ms, s.Detail)
		} else {
			t.Errorf("%-28s FAIL %8.1f ms  %s", s.Step, s.Ms, s.Error)
		}
	}
	if err != nil {
		t.Fatalf("sdk.mjs: %v (exit: %v)\nstdout:\n%s\nstderr:\n%s", err, runErr, stdout, stderr)
	}
	if len(sum.Failed) > 0 || runErr != nil {
		t.Fatalf("sdk.mjs: %d of %d steps failed %v (exit: %v)\nstderr:\n%s", len(sum.Failed), sum.Steps, sum.Failed, runErr, stderr)
	}
	if sum.Steps < 15 {
		t.Fatalf("sdk.mjs ran %d steps; it has 15", sum.Steps)
	}
}

// e2bPool is the sample pool of make run, python-pool of the
// python-runtime template, in ns, with two members, waited for until full.
func e2bPool(t *testing.T, c client.Client, ns string) {
	t.Helper()
	tpl := e2eTemplate(ns, "python-runtime")
	tpl.Spec.EnvVarsInjectionPolicy = extv1beta1.InjectionPolicyAllowed
	for _, o := range []client.Object{tpl, e2ePool(ns, "python-pool", "python-runtime", 2)} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "pool full", poolReady(c, ns, "python-pool", 2))
}

// e2bAgent is a ServiceAccount of ns with the rights an E2B user needs
// there (every verb on sandboxclaims, create sandboxes/exec), and a token
// of it: what a deployed router's --e2b-auth=tokenreview takes as the key.
func e2bAgent(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	const name = "e2b-agent"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{extv1beta1.GroupVersion.Group}, Resources: []string{"sandboxclaims"},
					Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
				{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}},
			},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(local.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("a token for %s/%s: %w", ns, name, err))
	}
	return tr.Status.Token
}

// checkE2BHello runs tests/e2b/hello.mjs, the example of docs/sdks.md, with the
// E2B settings `kubectl sandbox up` printed (export's arguments after
// "E2B_API_URL=") against its sample pool: it prints hi. Without Node.js it
// only checks that the printed settings name the router.
func checkE2BHello(t *testing.T, routerURL, export string) {
	t.Helper()
	vars := map[string]string{"E2B_API_URL": ""}
	fields := strings.Fields("E2B_API_URL=" + export)
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		vars[k] = v
	}
	env := e2b.Env{APIURL: vars["E2B_API_URL"], SandboxURL: vars["E2B_SANDBOX_URL"], APIKey: vars["E2B_API_KEY"]}
	if len(fields) != 3 || env.APIURL != routerURL || env.SandboxURL != routerURL || env.APIKey == "" {
		t.Fatalf("up printed `export E2B_API_URL=%s`; want the three E2B variables, both URLs the router's %s", export, routerURL)
	}
	if err := e2b.Available(); err != nil {
		t.Logf("not running the e2b example of docs/sdks.md: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := e2b.Install(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := e2b.Run(ctx, dir, env, "hello.mjs")
	if err != nil || string(stdout) != "hi\n" {
		t.Fatalf("the e2b example of docs/sdks.md printed %q, %v; want \"hi\\n\"\nstderr:\n%s", stdout, err, stderr)
	}
}
