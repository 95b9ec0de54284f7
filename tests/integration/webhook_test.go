package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// TestWebhookThroughTheAPIServer serves the validating webhook the way the
// controller does (self-issued certificate, CA injected into the installed
// configuration) and drives it through the real API server with kubectl:
// the Pod-level denial text, Warn as kubectl warnings, failurePolicy Fail
// when the webhook is down, and the namespace opt-out.
func TestWebhookThroughTheAPIServer(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	addr, err := tests.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, "agent-sandbox-system", port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })

	cm := &certs.Certs{Client: env.Client, Namespace: "agent-sandbox-system", CertDir: t.TempDir()}
	ca, err := cm.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	if string(cfg.Webhooks[0].ClientConfig.CABundle) != string(ca) {
		t.Fatal("the CA bundle was not injected")
	}
	// A second Ensure reuses the stored certificate.
	if again, err := cm.Ensure(ctx); err != nil || string(again) != string(ca) {
		t.Fatalf("second Ensure issued a new CA (err %v)", err)
	}

	// Baseline denies; runtime isolation only warns here.
	iso, _ := policy.Bundle(policy.BundleRuntimeIsolation)
	base, _ := policy.Bundle(policy.BundleBaseline)
	warnIso := strings.Replace(string(iso.Data), "validationActions: [Deny]", "validationActions: [Warn]", 1)
	set, err := policy.Load(policy.Source{Name: "warn-isolation", Data: []byte(warnIso)}, base)
	if err != nil {
		t.Fatal(err)
	}
	holder := &policy.Holder{}
	holder.Set(set)
	srv := webhook.NewServer(webhook.Options{Port: port, Host: "127.0.0.1", CertDir: cm.CertDir})
	srv.Register(webhooks.ValidatePath, &webhook.Admission{Handler: &webhooks.Validator{Policy: holder, Reader: env.Client}})
	srvCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Start(srvCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("webhook server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}

	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	apply := func(manifest string) (string, error) {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	sandbox := func(name, extra string) string {
		return `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: ` + name + `
spec:
  podTemplate:
    spec:
` + extra + `      containers:
      - name: agent
        image: python:3.13-slim
`
	}
	out, err := apply(sandbox("privileged", "") + "        securityContext:\n          privileged: true\n")
	if err == nil || !strings.Contains(out, "admission webhook \"validate.agents.x-k8s.io\" denied the request") ||
		!strings.Contains(out, "Pod "+ns+"/privileged: privileged containers are not allowed: agent (policy agent-sandbox-baseline)") {
		t.Errorf("kubectl apply of a privileged Sandbox: %v\n%s", err, out)
	}
	out, err = apply(sandbox("no-runtime-class", ""))
	if err != nil || !strings.Contains(out, "Warning: Pod "+ns+"/no-runtime-class: runtimeClassName (unset) is not allowed") {
		t.Errorf("kubectl apply of a Sandbox without runtime class should pass with a warning: %v\n%s", err, out)
	}
	if out, err := apply(sandbox("gvisor", "      runtimeClassName: gvisor\n")); err != nil || strings.Contains(out, "Warning") {
		t.Errorf("a compliant Sandbox: %v\n%s", err, out)
	}

	// failurePolicy Fail: with the webhook down, nothing is admitted ...
	stopServer()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("webhook server: %v", err)
	}
	if out, err := apply(sandbox("while-down", "      runtimeClassName: gvisor\n")); err == nil || !strings.Contains(out, "failed calling webhook") {
		t.Errorf("with the webhook down a Sandbox was admitted: %v\n%s", err, out)
	}
	// ... except in a namespace that opted out (break glass).
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[webhooks.OptOutLabel] = "disabled"
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	if out, err := apply(sandbox("break-glass", "      runtimeClassName: gvisor\n")); err != nil {
		t.Errorf("the opted-out namespace still calls the webhook: %v\n%s", err, out)
	}
}

// TestWebhookCertificateRenewal: a certificate due for renewal is replaced
// (Secret, files and CA bundle), one that is not is kept.
func TestWebhookCertificateRenewal(t *testing.T) {
	ctx, ns := localWebhook(t)
	now := time.Now()
	cm := &certs.Certs{Client: env.Client, Namespace: ns, CertDir: t.TempDir(), Now: func() time.Time { return now }}
	first, err := cm.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(300 * 24 * time.Hour) // 65 days left: not due yet
	if again, err := cm.Ensure(ctx); err != nil || string(again) != string(first) {
		t.Fatalf("renewed too early (err %v)", err)
	}
	now = now.Add(40 * 24 * time.Hour) // 25 days left: due
	renewed, err := cm.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed) == string(first) {
		t.Fatal("a certificate 25 days from expiry was not renewed")
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	if string(cfg.Webhooks[0].ClientConfig.CABundle) != string(renewed) {
		t.Error("the renewed CA was not injected")
	}
}
