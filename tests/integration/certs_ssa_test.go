package integration

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// TestWebhookCertWritersRaceOnSecret: two replicas that find no Secret, or
// a Secret due for renewal, at the same time end with one certificate, the
// one written first. The other's write fails (a create of a Secret that
// exists; an apply whose resourceVersion precondition no longer holds) and
// it takes what was written.
func TestWebhookCertWritersRaceOnSecret(t *testing.T) {
	ctx, ns := localWebhook(t)
	a, b := certsFor(t, ns), certsFor(t, ns)
	// race says which write of a's lets b write first; afterB is the
	// Secret as b left it.
	var race func(verb string, obj any) bool
	var afterB *corev1.Secret
	raced := 0
	a.Client = hookedClient(func(ctx context.Context, verb string, obj any) error {
		if race == nil || !race(verb, obj) {
			return nil
		}
		race = nil
		raced++
		if _, err := b.Ensure(ctx); err != nil {
			return err
		}
		afterB = secretOf(t, ns)
		return nil
	})

	race = createsSecret
	bundle, err := a.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if raced != 1 {
		t.Fatalf("b wrote first %d times, want once", raced)
	}
	stored := secretOf(t, ns)
	if stored.ResourceVersion != afterB.ResourceVersion {
		t.Errorf("a wrote the Secret b had just created")
	}
	if string(bundle) != string(stored.Data["ca.crt"]) || caCount(bundle) != 1 {
		t.Errorf("a's bundle (%d CAs) is not the stored one", caCount(bundle))
	}
	for name, c := range map[string]*certs.Certs{"a": a, "b": b} {
		if got, want := servedBy(t, c), serialOf(t, stored.Data["tls.crt"]); got != want {
			t.Errorf("replica %s serves %s, the Secret holds %s", name, got, want)
		}
	}

	// Both due for renewal; b renews between a's read and a's apply.
	a.RenewBefore, b.RenewBefore = 400*24*time.Hour, 400*24*time.Hour
	race = func(verb string, obj any) bool {
		_, ok := obj.(*corev1ac.SecretApplyConfiguration)
		return verb == "apply" && ok
	}
	if bundle, err = a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if raced != 2 {
		t.Fatal("a never tried to store its own renewal")
	}
	stored = secretOf(t, ns)
	if stored.ResourceVersion != afterB.ResourceVersion {
		t.Errorf("a overwrote the renewal b had just stored")
	}
	if len(afterB.Data["tls-next.crt"]) == 0 || string(stored.Data["tls-next.crt"]) != string(afterB.Data["tls-next.crt"]) {
		t.Errorf("the waiting certificate is not b's")
	}
	if string(bundle) != string(stored.Data["ca.crt"]) || caCount(bundle) != 2 {
		t.Errorf("bundle holds %d CAs (stored: %v), want the old CA and b's new one", caCount(bundle), string(bundle) == string(stored.Data["ca.crt"]))
	}
}

// TestWebhookCertReplicasStartTogether: replicas starting at once on an
// empty namespace all serve the one certificate stored.
func TestWebhookCertReplicasStartTogether(t *testing.T) {
	ctx, ns := localWebhook(t)
	replicas := make([]*certs.Certs, 4)
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i := range replicas {
		replicas[i] = certsFor(t, ns)
		wg.Go(func() { _, errs[i] = replicas[i].Ensure(ctx) })
	}
	wg.Wait()
	stored := secretOf(t, ns)
	for i, c := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if got, want := servedBy(t, c), serialOf(t, stored.Data["tls.crt"]); got != want {
			t.Errorf("replica %d serves %s, the Secret holds %s", i, got, want)
		}
	}
	if n := caCount(stored.Data["ca.crt"]); n != 1 {
		t.Errorf("the stored bundle holds %d CAs, want 1", n)
	}
}

// TestWebhookCAInjectionFieldManagers: the CA bundle is applied under the
// certificates' own field manager, which owns the caBundle fields and
// nothing else; another manager's fields on the same webhook stay its own;
// a second check, by the same replica or a restarted one, sends no write.
func TestWebhookCAInjectionFieldManagers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	writes := []string{}
	counting := hookedClient(func(_ context.Context, verb string, obj any) error {
		writes = append(writes, fmt.Sprintf("%s %T", verb, obj))
		return nil
	})
	cm := certsFor(t, ns)
	cm.Client = counting
	serveWebhook(t, ctx, cm, true)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	name := cfg.Webhooks[0].Name
	// A GitOps tool owns a label and the timeout of the same webhook.
	gitops := admissionregistrationv1ac.ValidatingWebhookConfiguration(cfg.Name).
		WithLabels(map[string]string{"team": "platform"}).
		WithWebhooks(admissionregistrationv1ac.ValidatingWebhook().WithName(name).WithTimeoutSeconds(7))
	if err := env.Client.Apply(ctx, gitops, client.FieldOwner("gitops"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	gitopsOwns := owned(cfg, "gitops")

	bundle, err := cm.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	key := `webhooks/k:{"name":"` + name + `"}/`
	if got, want := owned(cfg, certs.FieldManager), []string{key + "clientConfig/caBundle", key + "name"}; !slices.Equal(got, want) {
		t.Errorf("%s owns %q of the webhook configuration, want %q", certs.FieldManager, got, want)
	}
	if got := owned(cfg, "gitops"); !slices.Equal(got, gitopsOwns) {
		t.Errorf("gitops owns %q after the injection, before %q", got, gitopsOwns)
	}
	if string(cfg.Webhooks[0].ClientConfig.CABundle) != string(bundle) || *cfg.Webhooks[0].TimeoutSeconds != 7 || cfg.Labels["team"] != "platform" {
		t.Errorf("after the injection: bundle injected %v, timeout %d, label %q", string(cfg.Webhooks[0].ClientConfig.CABundle) == string(bundle),
			*cfg.Webhooks[0].TimeoutSeconds, cfg.Labels["team"])
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.CRDs[0]}, crd); err != nil {
		t.Fatal(err)
	}
	if got, want := owned(crd, certs.FieldManager), []string{"spec/conversion/webhook/clientConfig/caBundle"}; !slices.Equal(got, want) {
		t.Errorf("%s owns %q of the CRD, want %q", certs.FieldManager, got, want)
	}
	if string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) != string(bundle) {
		t.Error("the CRD's conversion webhook does not hold the bundle")
	}

	restarted := certsFor(t, ns)
	restarted.Client = counting
	for _, c := range []*certs.Certs{cm, restarted} {
		writes = writes[:0]
		if _, err := c.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		if len(writes) > 0 {
			t.Errorf("a check with nothing to change wrote: %q", writes)
		}
	}
}

// TestWebhookCertSecretOwnership: what updates wrote to the Secret (the
// create, right after it, or an earlier version of the controller that wrote it with plain
// updates) moves into the certificates' apply entry at the next write, so a
// promotion removes the waiting certificate whoever wrote it.
func TestWebhookCertSecretOwnership(t *testing.T) {
	ctx, ns := localWebhook(t)
	cm := certsFor(t, ns)
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	// The engine moves what its create recorded into its apply entry
	// right after the create.
	if got := managers(secretOf(t, ns)); !slices.Equal(got, []string{certs.FieldManager + " Apply"}) {
		t.Fatalf("the created Secret is managed by %q, want the create's entry moved into the apply entry", got)
	}
	cm.RenewBefore = 400 * 24 * time.Hour
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewing := secretOf(t, ns)
	if got := managers(renewing); !slices.Equal(got, []string{certs.FieldManager + " Apply"}) {
		t.Fatalf("after the renewal started the Secret is managed by %q, want only the apply entry", got)
	}

	// An earlier version of the controller wrote the renewing Secret with
	// plain writes.
	if err := env.Client.Delete(ctx, renewing); err != nil {
		t.Fatal(err)
	}
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: renewing.Name}, Type: renewing.Type, Data: renewing.Data}
	if err := env.Client.Create(ctx, old, client.FieldOwner("sandbox-controller")); err != nil {
		t.Fatal(err)
	}
	cm.RenewBefore, cm.PromoteAfter = 30*24*time.Hour, time.Millisecond
	time.Sleep(10 * time.Millisecond)
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := secretOf(t, ns)
	if serialOf(t, promoted.Data["tls.crt"]) != serialOf(t, renewing.Data["tls-next.crt"]) {
		t.Fatal("the waiting certificate was not promoted")
	}
	if _, ok := promoted.Data["tls-next.crt"]; ok {
		t.Errorf("the promoted certificate is still waiting as tls-next.crt")
	}
	if got := managers(promoted); !slices.Equal(got, []string{certs.FieldManager + " Apply"}) {
		t.Errorf("after the promotion the Secret is managed by %q, want only the apply entry", got)
	}
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if secretOf(t, ns).ResourceVersion != promoted.ResourceVersion {
		t.Error("the Secret was written again with nothing to change")
	}
}

// servedBy is the serial number of the certificate c serves.
func servedBy(t *testing.T, c *certs.Certs) string {
	t.Helper()
	cert, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// managers lists an object's managedFields entries as "manager operation".
func managers(o client.Object) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		out = append(out, m.Manager+" "+string(m.Operation))
	}
	sort.Strings(out)
	return out
}

// owned lists the leaf fields manager's Apply entry owns on o, as paths
// without the f: prefixes, sorted.
func owned(o client.Object, manager string) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if k == "." {
				continue
			}
			path := prefix + strings.TrimPrefix(k, "f:")
			sub, _ := v.(map[string]any)
			if len(sub) > 1 || (len(sub) == 1 && sub["."] == nil) {
				walk(path+"/", sub) // "." alone marks an owned list item or map
				continue
			}
			out = append(out, path)
		}
	}
	for _, m := range o.GetManagedFields() {
		if m.Manager != manager || m.Operation != metav1.ManagedFieldsOperationApply || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields); err != nil {
			panic(err)
		}
		walk("", fields)
	}
	sort.Strings(out)
	return out
}

// localWebhook gives a test a namespace of its own with the webhook's
// configuration installed for it (removed when the test ends).
func localWebhook(t *testing.T) (context.Context, string) {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	return ctx, ns
}
