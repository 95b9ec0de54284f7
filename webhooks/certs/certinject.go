package certs

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1ac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// inject sets the CA bundle on every webhook of our configuration and on
// the conversion webhooks of our CRDs, and reports whether anything had to
// change. Objects not installed (yet) are skipped: the next check injects
// them.
func (c *Certs) inject(ctx context.Context, bundle []byte) (changed bool, err error) {
	changed, err = c.injectWebhook(ctx, bundle)
	if err != nil {
		return false, err
	}
	for _, name := range CRDs {
		crdChanged, err := c.injectCRD(ctx, name, bundle)
		if err != nil {
			return false, err
		}
		changed = changed || crdChanged
	}
	return changed, nil
}

// injectWebhook applies the CA bundle to our webhook configuration
// (server-side apply under FieldManager) as just the caBundle of each of its
// webhooks, by name (the list's merge key): no other field is sent, so no
// other manager's field is touched, and a concurrent edit of another field
// is neither lost nor in the way. Ownership of the caBundle fields is
// forced: they are ours to set, as they were when a merge patch wrote them,
// and an earlier version of the controller may hold them as another
// manager. Applying what we own already sends nothing (ssa.Apply). changed
// says the configuration did not hold the bundle yet.
func (c *Certs) injectWebhook(ctx context.Context, bundle []byte) (changed bool, err error) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: c.WebhookConfigName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("injecting the CA bundle into %s: %w", c.WebhookConfigName, err)
	}
	if len(cfg.Webhooks) == 0 {
		return false, nil
	}
	desired := admissionregistrationv1ac.ValidatingWebhookConfiguration(cfg.Name).WithUID(cfg.UID)
	for _, w := range cfg.Webhooks {
		changed = changed || !bytes.Equal(w.ClientConfig.CABundle, bundle)
		desired.WithWebhooks(admissionregistrationv1ac.ValidatingWebhook().WithName(w.Name).
			WithClientConfig(admissionregistrationv1ac.WebhookClientConfig().WithCABundle(bundle...)))
	}
	change, err := ssa.Apply(ctx, c.engine, "ValidatingWebhookConfiguration", desired, cfg,
		admissionregistrationv1ac.ExtractValidatingWebhookConfiguration, ssa.Options{Force: true})
	if err != nil {
		return false, fmt.Errorf("injecting the CA bundle into %s: %w", c.WebhookConfigName, err)
	}
	if change.Action != ssa.Unchanged {
		log.FromContext(ctx).Info("CA bundle injected", "webhookConfiguration", c.WebhookConfigName)
	}
	return changed, nil
}

// injectCRD applies the CA bundle to a CRD's conversion webhook as
// injectWebhook does: spec.conversion.webhook.clientConfig.caBundle, and
// nothing else (a CRD without webhook conversion is left alone).
func (c *Certs) injectCRD(ctx context.Context, name string, bundle []byte) (changed bool, err error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("injecting the CA bundle into CRD %s: %w", name, err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return false, nil
	}
	desired := apiextensionsv1ac.CustomResourceDefinition(name).WithUID(crd.UID).WithSpec(apiextensionsv1ac.CustomResourceDefinitionSpec().
		WithConversion(apiextensionsv1ac.CustomResourceConversion().WithWebhook(apiextensionsv1ac.WebhookConversion().
			WithClientConfig(apiextensionsv1ac.WebhookClientConfig().WithCABundle(bundle...)))))
	change, err := ssa.Apply(ctx, c.engine, "CustomResourceDefinition", desired, crd,
		apiextensionsv1ac.ExtractCustomResourceDefinition, ssa.Options{Force: true})
	if err != nil {
		return false, fmt.Errorf("injecting the CA bundle into CRD %s: %w", name, err)
	}
	if change.Action != ssa.Unchanged {
		log.FromContext(ctx).Info("CA bundle injected", "crd", name)
	}
	return !bytes.Equal(conv.Webhook.ClientConfig.CABundle, bundle), nil
}

// injectedBundle is the CA bundle the webhook configuration holds now (nil
// when there is none or it cannot be read).
func (c *Certs) injectedBundle(ctx context.Context) []byte {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: c.WebhookConfigName}, cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info("reading the injected CA bundle", "error", err.Error())
		}
		return nil
	}
	for _, w := range cfg.Webhooks {
		if len(w.ClientConfig.CABundle) > 0 {
			return w.ClientConfig.CABundle
		}
	}
	return nil
}
