package webhooks

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Names of the objects the webhook serving certificates involve.
const (
	DefaultSecretName        = "agent-sandbox-webhook-cert"
	DefaultServiceName       = "agent-sandbox-webhook-service"
	DefaultWebhookConfigName = "agent-sandbox-validating-webhook"
	// OptOutLabel on a namespace (value "disabled") exempts it from the
	// webhook: break-glass when the controller is down and failurePolicy
	// Fail would block every change.
	OptOutLabel = "agents.x-k8s.io/policy-webhook"
)

// +kubebuilder:rbac:groups="",namespace=agent-sandbox-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=agent-sandbox-system,resources=secrets,verbs=get;update,resourceNames=agent-sandbox-webhook-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch,resourceNames=agent-sandbox-validating-webhook
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=sandboxes.agents.x-k8s.io;sandboxtemplates.extensions.agents.x-k8s.io;sandboxclaims.extensions.agents.x-k8s.io;sandboxwarmpools.extensions.agents.x-k8s.io

// CRDs are our CustomResourceDefinitions; those served through the
// conversion webhook get its CA bundle.
var CRDs = []string{
	"sandboxes.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io",
}

// Certs manages the webhook's serving certificate itself: a CA and a serving
// certificate kept in a Secret (shared by every replica), written to the
// webhook server's certificate directory, and the CA injected as caBundle
// into the webhook configuration. Certificates are renewed before expiry.
type Certs struct {
	// Client reads and writes without a cache (certificates are needed
	// before caches run).
	Client                client.Client
	Namespace, SecretName string
	WebhookConfigName     string
	ServiceName           string
	// ExtraHosts are further DNS names or IPs for the certificate (the
	// local cluster reaches the webhook at 127.0.0.1).
	ExtraHosts []string
	// CertDir receives tls.crt and tls.key.
	CertDir string
	// Validity of new certificates (default one year); RenewBefore is how
	// long before expiry they are replaced (default 30 days).
	Validity, RenewBefore time.Duration
	Now                   func() time.Time
}

func (c *Certs) defaults() {
	if c.SecretName == "" {
		c.SecretName = DefaultSecretName
	}
	if c.WebhookConfigName == "" {
		c.WebhookConfigName = DefaultWebhookConfigName
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.Validity == 0 {
		c.Validity = 365 * 24 * time.Hour
	}
	if c.RenewBefore == 0 {
		c.RenewBefore = 30 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// hosts are the names the certificate must cover.
func (c *Certs) hosts() []string {
	svc := c.ServiceName
	return append([]string{svc, svc + "." + c.Namespace, svc + "." + c.Namespace + ".svc",
		svc + "." + c.Namespace + ".svc.cluster.local", "localhost", "127.0.0.1"}, c.ExtraHosts...)
}

// Ensure makes sure a valid certificate exists, is on disk and is trusted by
// the webhook configuration. It returns the CA bundle.
func (c *Certs) Ensure(ctx context.Context) ([]byte, error) {
	c.defaults()
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.SecretName}
	secret := &corev1.Secret{}
	err := c.Client.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return nil, fmt.Errorf("reading webhook certificate Secret: %w", err)
	}
	if secret == nil || !c.usable(secret) {
		fresh, err := c.generate()
		if err != nil {
			return nil, err
		}
		if secret == nil {
			fresh.ObjectMeta = metav1.ObjectMeta{Namespace: c.Namespace, Name: c.SecretName}
			if err := c.Client.Create(ctx, fresh); apierrors.IsAlreadyExists(err) {
				// Another replica won the race: use its certificate.
				return c.Ensure(ctx)
			} else if err != nil {
				return nil, fmt.Errorf("storing webhook certificate: %w", err)
			}
			secret = fresh
		} else {
			secret.Data = fresh.Data
			if err := c.Client.Update(ctx, secret); apierrors.IsConflict(err) {
				return c.Ensure(ctx)
			} else if err != nil {
				return nil, fmt.Errorf("renewing webhook certificate: %w", err)
			}
		}
		log.FromContext(ctx).Info("webhook serving certificate issued", "secret", key.String())
	}
	if err := c.write(secret); err != nil {
		return nil, err
	}
	ca := secret.Data["ca.crt"]
	if err := c.inject(ctx, ca); err != nil {
		return nil, err
	}
	return ca, c.injectConversion(ctx, ca)
}

// injectConversion sets the CA bundle of our CRDs' conversion webhooks
// (CRDs without webhook conversion are left alone).
func (c *Certs) injectConversion(ctx context.Context, ca []byte) error {
	for _, name := range CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil ||
			bytes.Equal(conv.Webhook.ClientConfig.CABundle, ca) {
			continue
		}
		base := crd.DeepCopy()
		conv.Webhook.ClientConfig.CABundle = slices.Clone(ca)
		if err := c.Client.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("injecting the CA bundle into CRD %s: %w", name, err)
		}
		log.FromContext(ctx).Info("CA bundle injected", "crd", name)
	}
	return nil
}

// usable reports a stored certificate that covers our names and is not due
// for renewal.
func (c *Certs) usable(s *corev1.Secret) bool {
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			return false
		}
	}
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	if c.Now().Add(c.RenewBefore).After(cert.NotAfter) {
		return false
	}
	for _, h := range c.hosts() {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// generate makes a CA and a serving certificate signed by it.
func (c *Certs) generate() (*corev1.Secret, error) {
	now := c.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "agent-sandbox-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(c.Validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating webhook CA: %w", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: c.ServiceName + "." + c.Namespace + ".svc"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(c.Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range c.hosts() {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating webhook serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
	}, nil
}

// write puts the certificate where the webhook server reads it (it watches
// the files and picks up a renewal without a restart).
func (c *Certs) write(s *corev1.Secret) error {
	if c.CertDir == "" {
		return errors.New("no certificate directory")
	}
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return err
	}
	for _, k := range []string{"tls.crt", "tls.key"} {
		path := filepath.Join(c.CertDir, k)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, s.Data[k]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, s.Data[k], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

// inject sets the CA bundle on every webhook of our configuration. A
// missing configuration is not an error: it may be installed later (the
// periodic check injects it then).
func (c *Certs) inject(ctx context.Context, ca []byte) error {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: c.WebhookConfigName}, cfg); err != nil {
		return client.IgnoreNotFound(err)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, ca) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	base := cfg.DeepCopy()
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = slices.Clone(ca)
	}
	if err := c.Client.Patch(ctx, cfg, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("injecting the CA bundle into %s: %w", c.WebhookConfigName, err)
	}
	log.FromContext(ctx).Info("CA bundle injected", "webhookConfiguration", c.WebhookConfigName)
	return nil
}

// Keep runs Ensure every interval until ctx ends: renewals and a webhook
// configuration installed after start are handled without a restart.
func (c *Certs) Keep(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := c.Ensure(ctx); err != nil {
				log.FromContext(ctx).Error(err, "webhook certificate check failed; retrying")
			}
		}
	}
}
