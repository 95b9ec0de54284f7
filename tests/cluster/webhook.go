package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

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
	data, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "config", "webhook", "webhook.yaml"))
	if err != nil {
		return nil, err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("config/webhook/webhook.yaml: %w", err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		cc.Service, cc.URL = nil, &url
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
		for _, name := range []string{"sandboxes.agents.x-k8s.io", "sandboxtemplates.extensions.agents.x-k8s.io",
			"sandboxclaims.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"} {
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
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent-sandbox-system"}}
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
