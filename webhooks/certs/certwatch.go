package certs

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Run keeps the certificate current until ctx ends: it watches the one
// Secret (by name, in its namespace) and runs Ensure when it changes, when
// the next renewal step is due, and at least every Resync. Every replica
// runs it, so a certificate renewed or replaced by one is served by all
// within seconds.
func (c *Certs) Run(ctx context.Context) error {
	c.defaults()
	if c.Clientset == nil {
		return errors.New("webhook certificates: no clientset to watch the Secret with")
	}
	logger := log.FromContext(ctx)

	changed := make(chan struct{}, 1)
	kick := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.SecretName).String()
	}
	lw := toolscache.NewFilteredListWatchFromClient(c.Clientset.CoreV1().RESTClient(), "secrets", c.Namespace, byName)
	informer := toolscache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, toolscache.Indexers{})
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick,
	}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)

	failures := 0
	timer := time.NewTimer(0) // a first check at once, Secret or not
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-timer.C:
		}
		wait := time.Duration(0)
		if _, err := c.Ensure(ctx); ctx.Err() != nil {
			return nil
		} else if err != nil {
			failures++
			wait = min(time.Second<<min(failures, 6), time.Minute)
			// A passing failure (the API server away, a conflict) is
			// retried quietly; one that persists is an error.
			if failures <= 3 {
				logger.Info("webhook certificate check failed; retrying", "secret", c.Namespace+"/"+c.SecretName, "in", wait, "error", err.Error())
			} else {
				logger.Error(err, "webhook certificate check failed; retrying", "secret", c.Namespace+"/"+c.SecretName, "in", wait)
			}
		} else {
			failures = 0
			wait = c.untilNext()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// untilNext is how long Run may wait before the next check.
func (c *Certs) untilNext() time.Duration {
	wait := c.Resync
	if next := c.next.Load(); next != 0 {
		if d := time.Until(time.Unix(0, next)); d < wait {
			wait = max(d, time.Second)
		}
	}
	return wait
}
