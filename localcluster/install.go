package localcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/config/crd"
	"github.com/agentsandbox/reconciler/config/webhook"
)

// FieldManager owns what this package applies.
const FieldManager = "kubectl-sandbox"

// ControllerNamespace is where the local controller keeps its webhook
// certificate and leader-election Lease.
const ControllerNamespace = "agent-sandbox-system"

// CRDNames are the CustomResourceDefinitions the controller serves.
var CRDNames = []string{"sandboxes.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Client is an admin client for the cluster that knows core types and CRDs.
func (c *Cluster) Client() (client.Client, error) {
	return client.New(c.Config, client.Options{Scheme: scheme()})
}

// install creates the RuntimeClasses (handler = name unless handler is set)
// and, if asked, the CRDs.
func (c *Cluster) install(ctx context.Context, opts Options, handler string) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	for _, name := range opts.RuntimeClasses {
		h := handler
		if h == "" {
			h = name
		}
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: h}
		if err := cl.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating RuntimeClass %s: %w", name, err)
		}
	}
	if opts.InstallCRDs {
		return InstallCRDs(ctx, cl)
	}
	return nil
}

// InstallCRDs server-side applies the CRDs built into this binary and waits
// until the API server serves them.
func InstallCRDs(ctx context.Context, cl client.Client) error {
	defs, err := crd.Definitions()
	if err != nil {
		return err
	}
	var names []string
	for _, def := range defs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(def, &obj.Object); err != nil {
			return fmt.Errorf("embedded CRD: %w", err)
		}
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("installing CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, name := range names {
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			err := cl.Get(ctx, client.ObjectKey{Name: name}, got)
			if err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w", name, errors.Join(ctx.Err(), err))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// InstallLocalWebhook installs config/webhook's ValidatingWebhookConfiguration
// pointing at a controller running on this machine (https://127.0.0.1:port)
// instead of the in-cluster Service, and the controller's namespace. The
// controller injects the CA bundle itself. The returned function removes
// the configuration (with failurePolicy Fail it would refuse every Sandbox
// once the controller is gone).
func InstallLocalWebhook(ctx context.Context, c client.Client, namespace string, port int) (func() error, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(webhook.ValidatingWebhookConfiguration, cfg); err != nil {
		return nil, fmt.Errorf("config/webhook/webhook.yaml: %w", err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		cc.Service, cc.URL = nil, &url
	}
	old := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), old); err == nil {
		// Left by an earlier run on another port: replace it.
		if err := c.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	if err := c.Create(ctx, cfg); err != nil {
		return nil, fmt.Errorf("installing the webhook configuration: %w", err)
	}
	return func() error { return client.IgnoreNotFound(c.Delete(context.Background(), cfg)) }, nil
}

// InstallLocalConversion points our CRDs' conversion at a webhook on this
// machine (https://127.0.0.1:port/convert); the controller (or test)
// injects the CA bundle. The returned function turns conversion back off.
func InstallLocalConversion(ctx context.Context, c client.Client, port int) (func() error, error) {
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", port)
	set := func(ctx context.Context, conv *apiextensionsv1.CustomResourceConversion) error {
		for _, name := range CRDNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			crd.Spec.Conversion = conv
			if err := c.Update(ctx, crd); err != nil {
				return err
			}
		}
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControllerNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	err := set(ctx, &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
			ConversionReviewVersions: []string{"v1"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("installing conversion: %w", err)
	}
	return func() error {
		return set(context.Background(), &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter})
	}, nil
}
