package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/cmd/sandbox-controller/serving"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks"
)

// certsFor returns a certificate manager for the Secret in ns, as a
// replica of the controller would run it.
func certsFor(t *testing.T, ns string) *webhooks.Certs {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &webhooks.Certs{Client: env.Client, Clientset: cs, Namespace: ns}
}

// serveWebhook serves the admission (allowing everything) and conversion
// webhooks the way the controller does, with certs' certificate, on a free
// local port; it returns the address. The API server is pointed at it
// (webhook configuration and CRD conversion) until the test ends.
func serveWebhook(t *testing.T, ctx context.Context, certs *webhooks.Certs, install bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if install {
		remove, err := cluster.InstallLocalWebhook(ctx, env.Client, certs.Namespace, port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = remove() })
		off, err := cluster.InstallLocalConversion(ctx, env.Client, port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := off(); err != nil {
				t.Errorf("turning conversion off: %v", err)
			}
		})
	}
	srv := serving.NewWebhook(l, certs.GetCertificate, map[string]int64{webhooks.ConvertPath: webhooks.MaxConversionBodyBytes})
	srv.Register(webhooks.ConvertPath, webhooks.Converter{})
	srv.Register(webhooks.ValidatePath, &webhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})})
	srvCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start(srvCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return l.Addr().String()
}

// runReplica runs certs' watch loop, as every replica does, until the
// test ends.
func runReplica(t *testing.T, ctx context.Context, certs *webhooks.Certs) {
	t.Helper()
	runCtx, stop := context.WithCancel(logr.NewContext(ctx, testr.New(t)))
	ran := make(chan error, 1)
	go func() { ran <- certs.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// served is the serial number of the certificate served at addr ("" while
// nothing is served).
func served(addr string) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return ""
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// serialOf is the serial number of the first certificate of a PEM block.
func serialOf(t *testing.T, pemBytes []byte) string {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

func caCount(b []byte) int { return bytes.Count(b, []byte("BEGIN CERTIFICATE")) }

func secretOf(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: webhooks.DefaultSecretName}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// injected returns the CA bundles of the webhook configuration and of the
// Sandbox CRD's conversion webhook.
func injected(t *testing.T) (webhookBundle, crdBundle []byte) {
	t.Helper()
	ctx := context.Background()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: webhooks.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: webhooks.CRDs[0]}, crd); err != nil {
		t.Fatal(err)
	}
	return cfg.Webhooks[0].ClientConfig.CABundle, crd.Spec.Conversion.Webhook.ClientConfig.CABundle
}

// verifies says a certificate chains to a CA of bundle for the webhook's
// local address.
func verifies(t *testing.T, certPEM, bundle []byte) error {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return errors.New("empty bundle")
	}
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
	return err
}

// TestWebhookCertRotationWithoutOutage renews the certificate while the
// API server calls the webhooks: the new CA joins the bundle (webhook
// configuration and CRD conversion) before the new certificate is served,
// the old CA stays after, and v1alpha1 writes and reads (admission and
// conversion) work at every step.
func TestWebhookCertRotationWithoutOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	certs := certsFor(t, ns)
	certs.PromoteAfter = 2 * time.Second
	addr := serveWebhook(t, ctx, certs, true)
	first, err := certs.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	roundTrip := func(step string) {
		t.Helper()
		n++
		sb := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox",
			"metadata": map[string]any{"name": fmt.Sprintf("rotation-%d", n), "namespace": ns},
			"spec": map[string]any{"replicas": int64(0), "podTemplate": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "agent", "image": "python:3.13-slim"}}}}},
		}}
		if err := env.Client.Create(ctx, sb); err != nil {
			t.Fatalf("%s: creating a v1alpha1 Sandbox through the webhooks: %v", step, err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			t.Fatalf("%s: reading it back through conversion: %v", step, err)
		}
	}
	waitUntil(t, 10*time.Second, "the API server reaches the webhooks", func() bool {
		sb := &unstructured.UnstructuredList{}
		sb.SetAPIVersion("agents.x-k8s.io/v1alpha1")
		sb.SetKind("SandboxList")
		err := env.Client.List(ctx, sb, client.InNamespace(ns))
		if err != nil {
			t.Log(err)
		}
		return err == nil
	})
	roundTrip("before the rotation")
	oldSecret := secretOf(t, ns)

	// Due for renewal: the new CA is trusted first, the old certificate
	// still served.
	certs.RenewBefore = 400 * 24 * time.Hour
	bundle, err := certs.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caCount(first) != 1 || caCount(bundle) != 2 || !bytes.Contains(bundle, first) {
		t.Fatalf("bundle during the rotation has %d CAs (old included: %v), want the old and the new", caCount(bundle), bytes.Contains(bundle, first))
	}
	if vwc, crd := injected(t); !bytes.Equal(vwc, bundle) || !bytes.Equal(crd, bundle) {
		t.Fatalf("injected bundles hold %d (webhook) and %d (CRD) CAs, want both CAs", caCount(vwc), caCount(crd))
	}
	if got, want := served(addr), serialOf(t, oldSecret.Data["tls.crt"]); got != want {
		t.Fatalf("a renewed certificate is served before its CA was injected for PromoteAfter")
	}
	roundTrip("renewal started")

	// After PromoteAfter the new certificate is served; the old CA stays,
	// so replicas still serving the old certificate are trusted.
	time.Sleep(certs.PromoteAfter)
	certs.RenewBefore = 30 * 24 * time.Hour
	if _, err = certs.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	newSecret := secretOf(t, ns)
	if got, want := served(addr), serialOf(t, newSecret.Data["tls.crt"]); got != want || want == serialOf(t, oldSecret.Data["tls.crt"]) {
		t.Fatalf("serving %s after the promotion, want the new certificate %s", got, want)
	}
	vwc, crd := injected(t)
	for name, b := range map[string][]byte{"webhook configuration": vwc, "CRD conversion": crd} {
		if err := verifies(t, oldSecret.Data["tls.crt"], b); err != nil {
			t.Errorf("%s: the old certificate is no longer trusted after the promotion: %v", name, err)
		}
		if err := verifies(t, newSecret.Data["tls.crt"], b); err != nil {
			t.Errorf("%s: the new certificate is not trusted: %v", name, err)
		}
	}
	roundTrip("after the promotion")
}

// TestWebhookCertSecondReplicaWatches: a second replica serves the
// certificate another replica renewed within seconds, through its watch of
// the Secret (its periodic check is an hour away).
func TestWebhookCertSecondReplicaWatches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	a, b := certsFor(t, ns), certsFor(t, ns)
	b.Resync = time.Hour
	if _, err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	addr := serveWebhook(t, ctx, b, false)
	runReplica(t, ctx, b)
	want := serialOf(t, secretOf(t, ns).Data["tls.crt"])
	waitUntil(t, 10*time.Second, "the second replica serves the stored certificate", func() bool { return served(addr) == want })

	// Replica a renews: starts, then promotes.
	a.RenewBefore, a.PromoteAfter = 400*24*time.Hour, time.Millisecond
	for range 2 {
		time.Sleep(10 * time.Millisecond)
		if _, err := a.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	renewed := serialOf(t, secretOf(t, ns).Data["tls.crt"])
	if renewed == want {
		t.Fatal("replica a did not renew the certificate")
	}
	start := time.Now()
	waitUntil(t, 5*time.Second, "the second replica serves the renewed certificate", func() bool { return served(addr) == renewed })
	t.Logf("the second replica served the renewed certificate after %s", time.Since(start).Round(time.Millisecond))
}

// TestWebhookCertBrokenSecretReplaced: a Secret whose key does not match,
// whose certificate is not signed by its CA, has expired or misses the
// webhook's host names is replaced by the replica watching it, which then
// serves the replacement.
func TestWebhookCertBrokenSecretReplaced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	// donor issues certificates into another Secret, to break ours with.
	donor := func(name string, mutate func(*webhooks.Certs)) map[string][]byte {
		d := certsFor(t, ns)
		d.SecretName, d.WebhookConfigName = name, "none"
		if mutate != nil {
			mutate(d)
		}
		if _, err := d.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	replica := certsFor(t, ns)
	replica.Resync = time.Hour
	addr := serveWebhook(t, ctx, replica, false)
	runReplica(t, ctx, replica)
	waitUntil(t, 10*time.Second, "a certificate is served", func() bool { return served(addr) != "" })

	other := donor("other", nil)
	for _, tc := range []struct {
		name    string
		corrupt func(data map[string][]byte)
	}{
		{"key of another certificate", func(d map[string][]byte) { d["tls.key"] = other["tls.key"] }},
		{"not signed by its CA", func(d map[string][]byte) { d["ca.crt"] = other["ca.crt"] }},
		{"expired", func(d map[string][]byte) {
			old := donor("expired", func(c *webhooks.Certs) { c.Now = func() time.Time { return time.Now().Add(-2 * 365 * 24 * time.Hour) } })
			d["tls.crt"], d["tls.key"], d["ca.crt"] = old["tls.crt"], old["tls.key"], old["ca.crt"]
		}},
		{"wrong host names", func(d map[string][]byte) {
			wrong := donor("wrong-names", func(c *webhooks.Certs) { c.ServiceName = "someone-else" })
			d["tls.crt"], d["tls.key"], d["ca.crt"] = wrong["tls.crt"], wrong["tls.key"], wrong["ca.crt"]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := secretOf(t, ns)
			tc.corrupt(secret.Data)
			if err := env.Client.Update(ctx, secret); err != nil {
				t.Fatal(err)
			}
			broken := serialOf(t, secret.Data["tls.crt"])
			waitUntil(t, 10*time.Second, "the broken Secret is replaced and served", func() bool {
				s := &corev1.Secret{}
				if env.Client.Get(ctx, client.ObjectKeyFromObject(secret), s) != nil || s.ResourceVersion == secret.ResourceVersion {
					return false
				}
				pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
				if err != nil || verifies(t, s.Data["tls.crt"], s.Data["ca.crt"]) != nil {
					return false
				}
				serial := pair.Leaf.SerialNumber.String()
				return serial != broken && served(addr) == serial
			})
		})
	}
}

// TestWebhookCAInjectionRetriesConflicts: someone edits the webhook
// configuration between the controller's read and its patch. The patch
// carries the resourceVersion it read, so it fails and is retried on the
// new version: the other edit survives and the CA bundle is injected.
func TestWebhookCAInjectionRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	edits := 0
	racing := interceptedClient(func(ctx context.Context, obj client.Object) error {
		if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); !ok || edits > 0 {
			return nil
		}
		edits++
		// Another writer (a GitOps tool, an admin) lands first.
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cfg); err != nil {
			return err
		}
		cfg.Webhooks[0].TimeoutSeconds = ptr.To[int32](7)
		return env.Client.Update(ctx, cfg)
	})
	certs := &webhooks.Certs{Client: racing, Namespace: ns}
	bundle, err := certs.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if edits != 1 {
		t.Fatalf("the concurrent edit ran %d times", edits)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: webhooks.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Webhooks[0].TimeoutSeconds; got == nil || *got != 7 {
		t.Errorf("timeoutSeconds %v: the concurrent edit was overwritten by the CA injection", got)
	}
	if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, bundle) {
		t.Error("the CA bundle was not injected")
	}
}

// waitUntil polls cond every 50ms until it holds or timeout passes.
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

// interceptedClient is env's client with hook run before every patch.
func interceptedClient(hook func(context.Context, client.Object) error) client.Client {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		panic(err)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := hook(ctx, obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
}

// TestWebhookCertsWithDeployRBAC runs a replica's certificate management
// as the controller's ServiceAccount with exactly the generated RBAC
// (config/rbac/role.yaml): it can create, read, watch (by name) and update
// its Secret and inject the bundle, and a broken Secret is replaced through
// the watch; it cannot list other Secrets.
func TestWebhookCertsWithDeployRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, sa = "agent-sandbox-system", "agent-sandbox-controller"
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webhooks.DefaultSecretName}})

	raw, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}
	var created []client.Object
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var role rbacv1.Role // a ClusterRole has the same fields
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		name := "test-deploy-rbac"
		if meta.Kind == "ClusterRole" {
			created = append(created,
				&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role.Rules},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
		} else {
			created = append(created,
				&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: name}, Rules: role.Rules},
				&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: name}, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
		}
	}
	for _, o := range created {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the roles are in force", func() bool {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: webhooks.DefaultSecretName}, &corev1.Secret{})
		return !apierrors.IsForbidden(err)
	})
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("listing every Secret of its namespace: %v, want forbidden", err)
	}

	replica := &webhooks.Certs{Client: c, Clientset: cs, Namespace: ns, Resync: time.Hour}
	addr := serveWebhook(t, ctx, replica, false)
	runReplica(t, ctx, replica)
	waitUntil(t, 10*time.Second, "the certificate is issued and served", func() bool { return served(addr) != "" })
	cfgObj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: webhooks.DefaultWebhookConfigName}, cfgObj); err != nil {
		t.Fatal(err)
	}
	if n := caCount(cfgObj.Webhooks[0].ClientConfig.CABundle); n != 1 {
		t.Fatalf("the webhook configuration holds %d CAs", n)
	}

	secret := secretOf(t, ns)
	broken := serialOf(t, secret.Data["tls.crt"])
	secret.Data["tls.key"] = secretOf(t, ns).Data["ca.crt"] // not a key at all
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the broken Secret is replaced through the watch", func() bool {
		s := secretOf(t, ns)
		_, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		return err == nil && serialOf(t, s.Data["tls.crt"]) != broken && served(addr) == serialOf(t, s.Data["tls.crt"])
	})
}
