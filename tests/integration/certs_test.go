package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// TestWebhookCertRotationWithoutOutage renews the certificate while the
// API server calls the webhooks: the new CA joins the bundle (webhook
// configuration and CRD conversion) before the new certificate is served,
// the old CA stays after, and v1alpha1 writes and reads (admission and
// conversion) work at every step.
func TestWebhookCertRotationWithoutOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	cm := certsFor(t, ns)
	cm.PromoteAfter = 2 * time.Second
	addr := serveWebhook(t, ctx, cm, true)
	first, err := cm.Ensure(ctx)
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
	cm.RenewBefore = 400 * 24 * time.Hour
	bundle, err := cm.Ensure(ctx)
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
	time.Sleep(cm.PromoteAfter)
	cm.RenewBefore = 30 * 24 * time.Hour
	if _, err = cm.Ensure(ctx); err != nil {
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
	donor := func(name string, mutate func(*certs.Certs)) map[string][]byte {
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
			old := donor("expired", func(c *certs.Certs) { c.Now = func() time.Time { return time.Now().Add(-2 * 365 * 24 * time.Hour) } })
			d["tls.crt"], d["tls.key"], d["ca.crt"] = old["tls.crt"], old["tls.key"], old["ca.crt"]
		}},
		{"wrong host names", func(d map[string][]byte) {
			wrong := donor("wrong-names", func(c *certs.Certs) { c.ServiceName = "someone-else" })
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

// TestWebhookCAInjectionKeepsConcurrentEdits: someone edits the webhook
// configuration between the controller's read and its write. The write
// applies only the caBundle fields, so the other edit survives and the CA
// bundle is injected.
func TestWebhookCAInjectionKeepsConcurrentEdits(t *testing.T) {
	ctx, ns := localWebhook(t)
	edits := 0
	racing := hookedClient(func(ctx context.Context, verb string, obj any) error {
		if _, ok := obj.(*admissionregistrationv1ac.ValidatingWebhookConfigurationApplyConfiguration); !ok || edits > 0 {
			return nil
		}
		edits++
		// Another writer (a GitOps tool, an admin) lands first.
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
			return err
		}
		cfg.Webhooks[0].TimeoutSeconds = ptr.To[int32](7)
		return env.Client.Update(ctx, cfg)
	})
	cm := &certs.Certs{Client: racing, Namespace: ns}
	bundle, err := cm.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if edits != 1 {
		t.Fatalf("the concurrent edit ran %d times", edits)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Webhooks[0].TimeoutSeconds; got == nil || *got != 7 {
		t.Errorf("timeoutSeconds %v: the concurrent edit was overwritten by the CA injection", got)
	}
	if !bytes.Equal(cfg.Webhooks[0].ClientConfig.CABundle, bundle) {
		t.Error("the CA bundle was not injected")
	}
}
