package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// copyWatcher is a reader that notes whether each list asked the cache not
// to copy what it returns.
type copyWatcher struct {
	client.Reader
	lists, copied int
}

func (w *copyWatcher) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	w.lists++
	if lo.UnsafeDisableDeepCopy == nil || !*lo.UnsafeDisableDeepCopy {
		w.copied++
	}
	return w.Reader.List(ctx, list, opts...)
}

// TestCollectorsDoNotCopyTheCache: a scrape counts the cached Sandboxes and
// pools in place; copying them made each scrape of a controller holding
// 5000 Sandboxes allocate a copy of every one (a fifth of a second of CPU
// and its garbage, every scrape).
func TestCollectorsDoNotCopyTheCache(t *testing.T) {
	s := scheme(t)
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	w := &copyWatcher{Reader: fake.NewClientBuilder().WithScheme(s).Build()}
	for _, c := range []prometheus.Collector{&SandboxCollector{Reader: w}, &WarmPoolCollector{Reader: w}} {
		ch := make(chan prometheus.Metric, 100)
		c.Collect(ch)
		close(ch)
	}
	if w.lists != 2 || w.copied != 0 {
		t.Errorf("%d lists, %d of them copying the cache; want 2 and 0", w.lists, w.copied)
	}
}
