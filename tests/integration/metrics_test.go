package integration

import (
	"context"
	"crypto/tls"
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
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/cmd/sandbox-controller/serving"
	"github.com/agentsandbox/reconciler/tests"
)

// TestSecureMetrics serves metrics as the deploy bundle runs the
// controller (--metrics-secure): HTTPS, a caller without a token is
// refused (401), one whose token the API server authenticates but who may
// not get /metrics too (403), and a ServiceAccount bound to the bundle's
// metrics-reader ClusterRole reads them.
func TestSecureMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agent_sandbox_test_secure_metrics_probe", Help: "test"})
	probe.Set(1)
	crmetrics.Registry.MustRegister(probe)
	t.Cleanup(func() { crmetrics.Registry.Unregister(probe) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, watcher, err := serving.Metrics(l, serving.MetricsOptions{Secure: true, Config: env.Config, HTTPClient: httpClient, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if watcher != nil {
		t.Fatal("a certificate watcher without a certificate directory")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})

	// The bundle's ClusterRole, from config/rbac.
	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(raw, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })

	ns := env.Namespace(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
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
	scraper, stranger := token("prometheus"), token("stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+l.Addr().String()+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", code)
	}
	// controller-runtime's filter answers 500 for a token the API server
	// rejects; what matters is that it is refused.
	if code, _ := get("/metrics", "not-a-token"); code == http.StatusOK {
		t.Errorf("a made-up token: status %d, want a refusal", code)
	}
	if code, _ := get("/metrics", stranger); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the metrics-reader role: status %d, want 403", code)
	}
	// Ask only once the API server's RBAC has seen the binding (the
	// metrics server caches a denial for 30 seconds).
	waitUntil(t, 10*time.Second, "the binding is in force", func() bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":prometheus", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	})
	if code, body := get("/metrics", scraper); code != http.StatusOK || !strings.Contains(body, "agent_sandbox_test_secure_metrics_probe 1") {
		t.Fatalf("a ServiceAccount bound to %s: status %d\n%.300s", role.Name, code, body)
	}
	// Plain HTTP is not served on the secure port.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + l.Addr().String() + "/metrics")
	if err == nil {
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode == http.StatusOK {
			t.Error("metrics served over plain HTTP on the secure port")
		}
	}
}
