package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/agentsandbox/reconciler/cmd/sandbox-controller/serving"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// certsFor returns a certificate manager for the Secret in ns, as a
// replica of the controller would run it.
func certsFor(t *testing.T, ns string) *certs.Certs {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &certs.Certs{Client: env.Client, Clientset: cs, Namespace: ns}
}

// serveWebhook serves the admission (allowing everything) and conversion
// webhooks the way the controller does, with cm's certificate, on a free
// local port; it returns the address. The API server is pointed at it
// (webhook configuration and CRD conversion) until the test ends.
func serveWebhook(t *testing.T, ctx context.Context, cm *certs.Certs, install bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if install {
		remove, err := cluster.InstallLocalWebhook(ctx, env.Client, cm.Namespace, port)
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
	srv := serving.NewWebhook(l, cm.GetCertificate, map[string]int64{webhooks.ConvertPath: webhooks.MaxConversionBodyBytes})
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

// runReplica runs cm's watch loop, as every replica does, until the
// test ends.
func runReplica(t *testing.T, ctx context.Context, cm *certs.Certs) {
	t.Helper()
	runCtx, stop := context.WithCancel(logr.NewContext(ctx, testr.New(t)))
	ran := make(chan error, 1)
	go func() { ran <- cm.Run(runCtx) }()
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
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: certs.DefaultSecretName}, s); err != nil {
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
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.DefaultWebhookConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: certs.CRDs[0]}, crd); err != nil {
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

// hookedClient is env's client with hook run before every write (verb
// create, update, patch or apply; obj is the object or the apply
// configuration sent); an error from hook fails the write.
// createsSecret reports whether a write hookedClient sees creates a Secret:
// a create, or the engine's create by apply (an unstructured apply
// configuration, where later writes apply a typed one).
func createsSecret(verb string, obj any) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		return verb == "create"
	case interface{ GetKind() string }:
		return verb == "apply" && o.GetKind() == "Secret"
	}
	return false
}

func hookedClient(hook func(ctx context.Context, verb string, obj any) error) client.Client {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		panic(err)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := hook(ctx, "create", obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := hook(ctx, "update", obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := hook(ctx, "patch", obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if err := hook(ctx, "apply", obj); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
}
