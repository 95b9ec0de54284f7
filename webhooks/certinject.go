package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
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

// lockedPatch is a merge patch that carries the resourceVersion read, so
// the API server refuses it if someone else changed the object in between
// (a merge patch replaces whole lists: without the lock a concurrent edit
// of another webhook field would be overwritten).
func lockedPatch(base client.Object) client.Patch {
	return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
}

func (c *Certs) injectWebhook(ctx context.Context, bundle []byte) (changed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: c.WebhookConfigName}, cfg); err != nil {
			return client.IgnoreNotFound(err)
		}
		base := cfg.DeepCopy()
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = slices.Clone(bundle)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return c.Client.Patch(ctx, cfg, lockedPatch(base))
	})
	if err != nil {
		return false, fmt.Errorf("injecting the CA bundle into %s: %w", c.WebhookConfigName, err)
	}
	if changed {
		log.FromContext(ctx).Info("CA bundle injected", "webhookConfiguration", c.WebhookConfigName)
	}
	return changed, nil
}

// injectCRD sets the CA bundle of a CRD's conversion webhook (a CRD
// without webhook conversion is left alone).
func (c *Certs) injectCRD(ctx context.Context, name string, bundle []byte) (changed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return client.IgnoreNotFound(err)
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil ||
			bytes.Equal(conv.Webhook.ClientConfig.CABundle, bundle) {
			return nil
		}
		base := crd.DeepCopy()
		conv.Webhook.ClientConfig.CABundle = slices.Clone(bundle)
		changed = true
		return c.Client.Patch(ctx, crd, lockedPatch(base))
	})
	if err != nil {
		return false, fmt.Errorf("injecting the CA bundle into CRD %s: %w", name, err)
	}
	if changed {
		log.FromContext(ctx).Info("CA bundle injected", "crd", name)
	}
	return changed, nil
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
