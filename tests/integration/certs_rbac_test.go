package integration

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// TestWebhookCertsWithDeployRBAC runs a replica's certificate management
// as the controller's ServiceAccount with exactly the generated RBAC
// (config/rbac/role.yaml): it can create, read, watch (by name) and apply to
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
	_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certs.DefaultSecretName}})

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
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: certs.DefaultSecretName}, &corev1.Secret{})
		return !apierrors.IsForbidden(err)
	})
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("listing every Secret of its namespace: %v, want forbidden", err)
	}

	replica := &certs.Certs{Client: c, Clientset: cs, Namespace: ns, Resync: time.Hour}
	addr := serveWebhook(t, ctx, replica, false)
	runReplica(t, ctx, replica)
	waitUntil(t, 10*time.Second, "the certificate is issued and served", func() bool { return served(addr) != "" })
	cfgObj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfgObj); err != nil {
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
