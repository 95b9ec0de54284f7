package router

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/e2b"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/tests"
)

// grantE2B gives the router ServiceAccount of ns (routerIdentity's) the
// ClusterRole of config/router/e2b/rbac.yaml, under a name of its own.
func grantE2B(t *testing.T, ns string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "router", "e2b", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict([]byte(strings.Split(string(raw), "\n---\n")[0]), role); err != nil {
		t.Fatal(err)
	}
	role.Name = ns + "-router-e2b"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "sandbox-router"}},
	}
	ctx := ctxFor(t)
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), role)
	})
}

// e2bUser makes ServiceAccount sa in ns, allowed the E2B calls there
// (sandboxclaims verbs, and create sandboxes/exec unless noExec), and
// returns its token.
func e2bUser(t *testing.T, ns, sa string, verbs []string, exec bool) string {
	t.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{extv1beta1.GroupVersion.Group}, Resources: []string{"sandboxclaims"}, Verbs: verbs}}
	if exec {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}})
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: rules}
	if err := env.Client.Create(ctxFor(t), role); err != nil {
		t.Fatal(err)
	}
	token := saToken(t, ns, sa)
	bind(t, ns, sa, "Role", sa)
	return token
}

// standInController serves the claims of ns as the claim controller
// would, for the router's sake: a claim gets a Sandbox it controls and a
// Ready Pod at 127.0.0.1, and Ready; a Suspended Sandbox loses its Pod,
// a Running one without a Pod gets one. (The controller has tests of its
// own; these test the router.)
func standInController(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			serveClaims(ctx, ns)
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
}

func serveClaims(ctx context.Context, ns string) {
	var claims extv1beta1.SandboxClaimList
	if err := env.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		sb := &sandboxv1beta1.Sandbox{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name}, sb)
		if apierrors.IsNotFound(err) {
			sb = &sandboxv1beta1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}}},
				Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python:3.13-slim"}}},
				}}},
			}
			if env.Client.Create(ctx, sb) != nil {
				continue
			}
		} else if err != nil {
			continue
		}
		pod := &corev1.Pod{}
		perr := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sb.Name}, pod)
		switch {
		case sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended && perr == nil:
			_ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
		case sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended && apierrors.IsNotFound(perr):
			standInPod(ctx, sb)
		}
		if len(c.Status.Conditions) == 0 {
			c.Status.Sandbox.Name = sb.Name
			c.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: "DependenciesReady", ObservedGeneration: c.Generation, LastTransitionTime: metav1.Now()}}
			_ = env.Client.Status().Update(ctx, c)
		}
	}
}

// standInPod makes sb's Pod, Ready at 127.0.0.1, as createPod does, but
// off the test's goroutine: failures are left for the next round.
func standInPod(ctx context.Context, sb *sandboxv1beta1.Sandbox) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: "0badc0de"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox",
				Name: sb.Name, UID: sb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: sb.Spec.PodTemplate.Spec.Containers},
	}
	if env.Client.Create(ctx, p) != nil {
		return
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if env.Client.Status().Update(ctx, p) != nil {
		_ = env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)) // made again next round
	}
}

// e2bBackend is the sandbox stand-in: it answers with the path and the
// credentials that reached it; /stream sends a line, then the next only
// once release is closed.
func e2bBackend(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			_, _ = io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			_, _ = io.WriteString(w, "second\n")
			return
		}
		_, _ = io.WriteString(w, "sandbox saw "+r.URL.Path+" token="+r.Header.Get(e2b.HeaderAccessToken)+
			" key="+r.Header.Get(e2b.HeaderAPIKey)+" auth="+r.Header.Get("Authorization"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// startE2B runs the router with the E2B API as cfg's identity, reviewing
// keys (TokenReview), until the test ends; it returns its URL.
func startE2B(t *testing.T, cfg *rest.Config, keyNS string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache, err := router.NewCache(ctx, cfg, router.CacheOptions{Claims: true, TrimClaim: e2b.TrimClaim})
	if err != nil {
		t.Fatal(err)
	}
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- cache.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx) {
		cancel()
		t.Fatal("the router's cache did not sync")
	}
	transport := router.NewTransport(nil)
	rc, err := resume.NewREST(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	limits := router.Limits{DefaultTimeout: 30 * time.Second, MaxTimeout: time.Minute, AllowLocalAddresses: true}
	h := router.NewHandler(router.Options{
		Resolver:  &router.CacheResolver{Reader: cache, ClusterDomain: "cluster.local"},
		Transport: transport, Limits: limits, ResolveWait: 2 * time.Second,
		Resume: &resume.Writer{REST: rc}, ResumeTimeout: 30 * time.Second,
		Metrics: router.NewMetrics(prometheus.NewRegistry()), Log: testr.New(t),
	})
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := e2b.RandomTokens()
	if err != nil {
		t.Fatal(err)
	}
	tr := router.NewTokenReview(kubernetes.NewForConfigOrDie(cfg), router.TokenReviewOptions{})
	eo := e2b.Options{Client: cl, Cache: cache, Sandboxes: rc, Proxy: h, Auth: tr, DefaultNamespace: "default",
		Tokens: tokens, ReadyTimeout: 20 * time.Second, ResolveWait: 2 * time.Second, MaxRequestTimeout: time.Minute,
		EnvdPort: envdHealth(t), Log: testr.New(t)}
	if keyNS != "" {
		keys, err := ctrlcache.New(cfg, ctrlcache.Options{Scheme: env.Scheme, ReaderFailOnMissingInformer: true,
			DefaultNamespaces: map[string]ctrlcache.Config{keyNS: {}},
			ByObject:          map[client.Object]ctrlcache.ByObject{&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{e2b.LabelAPIKey: "true"})}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keys.GetInformer(ctx, &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
		go func() { _ = keys.Start(ctx) }()
		if !keys.WaitForCacheSync(syncCtx) {
			cancel()
			t.Fatal("the key cache did not sync")
		}
		eo.Keys = &e2b.KeySecrets{Reader: keys, Namespace: keyNS}
	}
	front := e2b.New(eo).Front(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- router.Serve(ctx, l, h, router.ServerOptions{ShutdownTimeout: 5 * time.Second, Front: front})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("router: %v", err)
		}
		if err := <-cacheDone; err != nil {
			t.Errorf("router cache: %v", err)
		}
		transport.CloseIdleConnections()
	})
	return "http://" + l.Addr().String()
}

// e2bCall sends one request as the SDK would (body JSON, headers as
// given) and returns the status, the body and the response headers.
func e2bCall(t *testing.T, method, url, body string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxFor(t), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return v
}

// firstLine reads the first line of a streamed response within d.
func firstLine(t *testing.T, resp *http.Response, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(d):
		t.Fatalf("no streamed line within %s: the response is buffered", d)
	}
	return ""
}

// grantKeys lets the router ServiceAccount of ns list and watch the
// Secrets of keyNS, as config/router/e2b/api-keys.yaml does.
func grantKeys(t *testing.T, ns, keyNS string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "router", "e2b", "api-keys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{}
	if err := yaml.UnmarshalStrict([]byte(strings.Split(string(raw), "\n---\n")[0]), role); err != nil {
		t.Fatal(err)
	}
	role.Namespace = keyNS
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: keyNS, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "sandbox-router"}}}
	if err := env.Client.Create(ctxFor(t), role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctxFor(t), rb); err != nil {
		t.Fatal(err)
	}
}

// envdHealth stands in for the daemon connect waits for: it answers
// GET /health with 204 on a port of its own (the stand-in Pods are all
// 127.0.0.1) and returns that port.
func envdHealth(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}
