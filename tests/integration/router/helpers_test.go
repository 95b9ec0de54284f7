package router

import (
	"context"
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
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
	"github.com/agentsandbox/reconciler/tests"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createSandbox makes a Sandbox with a controller owner (nil for none)
// and labels and annotations.
func createSandbox(t *testing.T, ns, name string, owner *metav1.OwnerReference, labels, annotations map[string]string) *sandboxv1beta1.Sandbox {
	t.Helper()
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{PodTemplate: sandboxv1beta1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python:3.13-slim"}}},
		}}},
	}
	if owner != nil {
		sb.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := env.Client.Create(ctxFor(t), sb); err != nil {
		t.Fatalf("creating Sandbox %s: %v", name, err)
	}
	return sb
}

func controller(apiVersion, kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-0000-uid"), Controller: ptr.To(true)}
}

// createPod makes the Sandbox's Pod, as the controller would (controlled
// by it, with the name-hash label), Running and Ready at ip unless ip is
// empty (then Pending).
func createPod(t *testing.T, sb *sandboxv1beta1.Sandbox, name, ip string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: name,
			Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: "0badc0de"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox",
				Name: sb.Name, UID: sb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: sb.Spec.PodTemplate.Spec.Containers},
	}
	if err := env.Client.Create(ctxFor(t), p); err != nil {
		t.Fatalf("creating Pod %s: %v", name, err)
	}
	if ip != "" {
		setReady(t, p, ip)
	}
	return p
}

// setReady plays the kubelet: the Pod runs, Ready, at ip.
func setReady(t *testing.T, p *corev1.Pod, ip string) {
	t.Helper()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if err := env.Client.Status().Update(ctxFor(t), p); err != nil {
		t.Fatalf("setting Pod %s Ready: %v", p.Name, err)
	}
}

// routerIdentity makes the router's ServiceAccount in ns with the
// ClusterRole of config/router/rbac.yaml, and returns a config that acts
// as it (so the router has exactly the deploy bundle's rights).
func routerIdentity(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := ctxFor(t)
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "router", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var probe metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &probe); err == nil && probe.Kind == "ClusterRole" {
			role = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == nil {
		t.Fatal("config/router/rbac.yaml has no ClusterRole")
	}
	role.Name = ns + "-router" // one per test: ClusterRoles are not namespaced
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "sandbox-router"}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sandbox-router"}}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), role)
	})
	user := "system:serviceaccount:" + ns + ":sandbox-router"
	cs := kubernetes.NewForConfigOrDie(env.Config)
	waitUntil(t, 30*time.Second, "the router's RBAC is in force", func() bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Group: sandboxv1beta1.GroupName, Resource: "sandboxes"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return cfg
}

// startRouter runs the router as cfg's identity until the test ends and
// returns its URL.
func startRouter(t *testing.T, cfg *rest.Config, cacheOpts router.CacheOptions, configure func(*router.Options)) (string, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache, err := router.NewCache(ctx, cfg, cacheOpts)
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
	reg := prometheus.NewRegistry()
	metrics := router.NewMetrics(reg)
	transport := router.NewTransport(nil)
	o := router.Options{
		Resolver:    &router.CacheResolver{Reader: cache, ClusterDomain: "cluster.local", Namespaces: cacheOpts.Namespaces},
		Transport:   transport,
		Limits:      router.Limits{DefaultTimeout: 30 * time.Second, MaxTimeout: time.Minute, AllowLocalAddresses: true},
		ResolveWait: 2 * time.Second,
		Metrics:     metrics,
		Log:         testr.New(t),
	}
	if configure != nil {
		configure(&o)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- router.Serve(ctx, l, router.NewHandler(o), router.ServerOptions{ShutdownTimeout: 5 * time.Second})
	}()
	t.Cleanup(func() {
		// call's idle connections first: the client transport dials
		// connections a request then does not use (another came free), and
		// the server's Shutdown waits up to 5 s for such a connection, one
		// that never sent a request, as long as its own timeout here.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("router: %v", err)
		}
		if err := <-cacheDone; err != nil {
			t.Errorf("router cache: %v", err)
		}
		transport.CloseIdleConnections()
	})
	return "http://" + l.Addr().String(), reg
}

// counter is the value of a counter with one label, 0 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// backend is a sandbox stand-in on 127.0.0.1: it answers with the path and
// whether an Authorization header reached it.
func backend(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "sandbox saw "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// call sends one request through the router.
func call(t *testing.T, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, url+"/list/work", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
