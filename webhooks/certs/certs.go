package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// Names of the objects the webhook serving certificates involve.
const (
	DefaultSecretName        = "agent-sandbox-webhook-cert"
	DefaultServiceName       = "agent-sandbox-webhook-service"
	DefaultWebhookConfigName = "agent-sandbox-validating-webhook"
)

// FieldManager owns what the certificate manager writes: the Secret and
// the caBundle fields of the webhook configuration and the CRDs' conversion
// webhooks (server-side apply through an ssa.Engine).
const FieldManager = "agent-sandbox-certs"

// The certificate Secret: created (a create cannot be limited to a name),
// then read, watched and patched (server-side apply) by name only. A list
// or watch is limited to the name by its metadata.name field selector.
//
// +kubebuilder:rbac:groups="",namespace=agent-sandbox-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=agent-sandbox-system,resources=secrets,verbs=get;list;watch;patch,resourceNames=agent-sandbox-webhook-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch,resourceNames=agent-sandbox-validating-webhook
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=sandboxes.agents.x-k8s.io;sandboxtemplates.extensions.agents.x-k8s.io;sandboxclaims.extensions.agents.x-k8s.io;sandboxwarmpools.extensions.agents.x-k8s.io

// CRDs are our CustomResourceDefinitions; those served through the
// conversion webhook get its CA bundle.
var CRDs = []string{
	"sandboxes.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io",
}

// Certs manages the webhook's serving certificate itself: a CA and a
// serving certificate kept in a Secret shared by every replica, served from
// memory (GetCertificate), and the CA bundle injected into the webhook
// configuration and the CRDs' conversion webhooks.
//
// A renewal never breaks a caller: the new CA joins the bundle first, the
// new certificate is served only once that bundle has been injected for
// PromoteAfter, and the old CA stays in the bundle for Overlap after that.
// A stored certificate that cannot be served (key not matching, not signed
// by the bundle, expired, missing a host name) is replaced at once. Every
// replica watches the Secret (Run) and serves what it holds within seconds.
type Certs struct {
	// Client reads and writes without a cache (certificates are needed
	// before caches run).
	Client client.Client
	// Clientset watches the Secret (Run only).
	Clientset             kubernetes.Interface
	Namespace, SecretName string
	WebhookConfigName     string
	ServiceName           string
	// ExtraHosts are further DNS names or IPs for the certificate (the
	// local cluster reaches the webhook at 127.0.0.1).
	ExtraHosts []string
	// CertDir, when set, also receives tls.crt and tls.key (for servers
	// that read files).
	CertDir string
	// Validity of new certificates (default one year); RenewBefore is how
	// long before expiry they are replaced (default 30 days).
	Validity, RenewBefore time.Duration
	// PromoteAfter (default one minute) and Overlap (default 24 hours):
	// see the type's comment.
	PromoteAfter, Overlap time.Duration
	// Resync is the longest Run waits between two checks (default ten
	// minutes); the Secret's watch events and the next renewal step wake
	// it earlier.
	Resync time.Duration
	Now    func() time.Time

	mu      sync.Mutex  // one Ensure at a time
	engine  *ssa.Engine // writes, under FieldManager (made by Ensure)
	serving atomic.Pointer[tls.Certificate]
	next    atomic.Int64 // unix nanoseconds of the next due step
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
	if c.PromoteAfter == 0 {
		c.PromoteAfter = time.Minute
	}
	if c.Overlap == 0 {
		c.Overlap = 24 * time.Hour
	}
	if c.Resync == 0 {
		c.Resync = 10 * time.Minute
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

func (c *Certs) policy() certPolicy {
	return certPolicy{
		hosts: c.hosts(), commonName: c.ServiceName + "." + c.Namespace + ".svc",
		validity: c.Validity, renewBefore: c.RenewBefore, promoteAfter: c.PromoteAfter, overlap: c.Overlap,
	}
}

// GetCertificate serves the certificate this replica holds (for
// tls.Config.GetCertificate): a new one is served without a restart.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.serving.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("no webhook serving certificate yet")
}

// Ensure makes sure a servable certificate is stored, trusted by the
// webhook configuration and the CRDs, and served by this replica; it takes
// the next renewal step when one is due. It returns the CA bundle.
func (c *Certs) Ensure(ctx context.Context) ([]byte, error) {
	c.defaults()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.engine == nil {
		c.engine = ssa.New(c.Client, FieldManager, "")
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.SecretName}
	for attempt := 0; ; attempt++ {
		secret := &corev1.Secret{}
		err := c.Client.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			return nil, fmt.Errorf("reading webhook certificate Secret: %w", err)
		}
		now := c.Now()
		// Replicas may serve what the injected bundle trusts even if the
		// Secret was deleted or lost its CA: keep trusting it a while.
		injected := c.injectedBundle(ctx)
		var data map[string][]byte
		trusted := false
		if secret != nil {
			data = secret.Data
			if _, err := checkPair(data[keyCert], data[keyKey], parseCerts(data[keyCA]), now, c.hosts()); err == nil {
				// A servable certificate's bundle must be trusted before
				// anything changes (a broken one is not injected at all).
				changed, err := c.inject(ctx, data[keyCA])
				if err != nil {
					return nil, err
				}
				trusted = !changed
			}
		}
		out, action, reason, err := plan(data, now, c.policy(), trusted, injected)
		if err != nil {
			return nil, err
		}
		if action != planNone {
			retry, err := c.store(ctx, secret, out)
			if err != nil {
				return nil, err
			}
			if retry {
				if attempt >= 5 {
					return nil, errors.New("webhook certificate Secret: too many conflicting writers")
				}
				continue // another replica wrote first: start from what it wrote
			}
			log.FromContext(ctx).Info("webhook serving certificate "+string(action), "secret", key.String(), "reason", reason)
			if !bytes.Equal(out[keyCA], data[keyCA]) {
				if _, err := c.inject(ctx, out[keyCA]); err != nil {
					return nil, err
				}
			}
		}
		if err := c.serve(out); err != nil {
			return nil, err
		}
		if step := nextStep(out, now, c.policy()); !step.IsZero() {
			// Kept on the wall clock: Now may be a test's clock.
			c.next.Store(time.Now().Add(step.Sub(now)).UnixNano())
		}
		return out[keyCA], nil
	}
}

// store writes the Secret; retry says another writer came first. A
// missing Secret is created, never overwritten: should another replica
// create it first, the create fails and its certificate is used. An
// existing one is applied with the resourceVersion read as a precondition,
// so a concurrent writer makes the apply fail instead of being overwritten.
// The Secret is ours alone, as its whole data was when it was written with
// updates: what updates (our create, earlier versions, someone's edit) set
// moves into our apply entry first, and the apply takes ownership of what it
// sets, so a broken Secret is replaced whoever broke it and keys no longer
// wanted (a promoted tls-next.*) go.
func (c *Certs) store(ctx context.Context, secret *corev1.Secret, data map[string][]byte) (retry bool, err error) {
	if secret == nil {
		fresh := corev1ac.Secret(c.SecretName, c.Namespace).WithType(corev1.SecretTypeTLS).WithData(data)
		_, exists, err := c.engine.Create(ctx, "Secret", fresh, &corev1.Secret{})
		if err != nil {
			return false, fmt.Errorf("storing webhook certificate: %w", err)
		}
		return exists, nil
	}
	var updaters []string
	for _, m := range secret.ManagedFields {
		if m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" {
			updaters = append(updaters, m.Manager)
		}
	}
	_, err = c.engine.UpgradeOwnership(ctx, "Secret", secret, updaters...)
	if err == nil {
		desired := corev1ac.Secret(c.SecretName, c.Namespace).
			WithResourceVersion(secret.ResourceVersion).WithUID(secret.UID).
			WithType(corev1.SecretTypeTLS).
			WithData(data)
		_, err = ssa.Apply(ctx, c.engine, "Secret", desired, secret, corev1ac.ExtractSecret, ssa.Options{Force: true})
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("updating webhook certificate: %w", err)
	}
	return false, nil
}

// serve makes the stored certificate the one this replica serves, and
// writes it to CertDir when set.
func (c *Certs) serve(data map[string][]byte) error {
	if cur := c.serving.Load(); cur == nil || !bytes.Equal(cur.Certificate[0], firstDER(data[keyCert])) {
		pair, err := tls.X509KeyPair(data[keyCert], data[keyKey])
		if err != nil {
			return fmt.Errorf("webhook serving certificate: %w", err)
		}
		c.serving.Store(&pair)
	}
	if c.CertDir == "" {
		return nil
	}
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return err
	}
	for _, k := range []string{keyCert, keyKey} {
		path := filepath.Join(c.CertDir, k)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data[k]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data[k], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

func firstDER(certPEM []byte) []byte {
	if c := firstCert(certPEM); c != nil {
		return c.Raw
	}
	return nil
}

// nextStep is when the stored certificates next need a look: a waiting
// certificate to promote, a renewal to start, a CA leaving the bundle.
func nextStep(data map[string][]byte, now time.Time, p certPolicy) time.Time {
	var due []time.Time
	cur, next := firstCert(data[keyCert]), firstCert(data[keyNextCert])
	switch {
	case next != nil:
		due = append(due, issuedAt(next).Add(p.promoteAfter))
	case cur != nil:
		due = append(due, cur.NotAfter.Add(-p.renewBefore))
	}
	for _, ca := range parseCerts(data[keyCA]) {
		due = append(due, ca.NotAfter)
		signs := func(leaf *x509.Certificate) bool { return leaf != nil && leaf.CheckSignatureFrom(ca) == nil }
		if cur != nil && !signs(cur) && !signs(next) {
			due = append(due, issuedAt(cur).Add(p.promoteAfter+p.overlap))
		}
	}
	best := time.Time{}
	for _, t := range due {
		if !t.After(now) {
			// Due but blocked (a promotion waits for its bundle to be
			// injected): look again soon.
			t = now.Add(5 * time.Second)
		}
		if best.IsZero() || t.Before(best) {
			best = t
		}
	}
	return best
}
