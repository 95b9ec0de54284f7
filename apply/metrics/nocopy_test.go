package metrics

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
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

// TestWarmPoolCollectorDoesNotCopyTheCache: a scrape counts the cached
// pools in place (a deep copy of each, every scrape, otherwise).
func TestWarmPoolCollectorDoesNotCopyTheCache(t *testing.T) {
	s := scheme(t)
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	w := &copyWatcher{Reader: fake.NewClientBuilder().WithScheme(s).Build()}
	ch := make(chan prometheus.Metric, 100)
	(&WarmPoolCollector{Reader: w}).Collect(ch)
	close(ch)
	if w.lists != 1 || w.copied != 0 {
		t.Errorf("%d lists, %d of them copying the cache; want 1 and 0", w.lists, w.copied)
	}
}

// indexerOf is a client-go indexer holding objs, as an informer's.
func indexerOf(t *testing.T, objs ...*sandboxv1beta1.Sandbox) func(context.Context) (toolscache.Indexer, error) {
	t.Helper()
	ix := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, o := range objs {
		if err := ix.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return func(context.Context) (toolscache.Indexer, error) { return ix, nil }
}

// TestSandboxCollectorCountsInPlace: the Sandboxes are counted in the
// informer's indexer, each where it is, and allocate next to nothing per
// Sandbox (listing them copied each one's ~1 KiB struct, every scrape).
func TestSandboxCollectorCountsInPlace(t *testing.T) {
	const n = 2000
	type key struct{ ns, ready, launch, tpl string }
	want := map[key]float64{}
	var objs []*sandboxv1beta1.Sandbox
	for i := range n {
		launch := []string{sandboxv1beta1.LaunchTypeCold, sandboxv1beta1.LaunchTypeWarm}[i%2]
		k := key{fmt.Sprintf("ns-%d", i%7), "Unknown", launch, fmt.Sprintf("tpl-%d", i%3)}
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
			Namespace: k.ns, Name: fmt.Sprintf("sb-%d", i),
			Labels:      map[string]string{sandboxv1beta1.LabelLaunchType: launch},
			Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: k.tpl},
		}}
		if i%5 != 0 {
			sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue}}
			k.ready = "True"
		}
		objs = append(objs, sb)
		want[key{k.ns, k.ready, k.launch, k.tpl}]++
	}
	c := &SandboxCollector{Indexer: indexerOf(t, objs...)}

	ch := make(chan prometheus.Metric, 4096)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c.Collect(ch)
	runtime.ReadMemStats(&after)
	close(ch)
	// A pointer each in the indexer's list, and the series.
	if perSandbox := (after.TotalAlloc - before.TotalAlloc) / n; perSandbox > 128 {
		t.Errorf("a scrape allocated %d bytes per Sandbox", perSandbox)
	}
	got := map[key]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		l := map[string]string{}
		for _, p := range pb.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["owned_by"] != none {
			t.Errorf("owned_by %q, want %q", l["owned_by"], none)
		}
		got[key{l["namespace"], l["ready_condition"], l["launch_type"], l["sandbox_template"]}] += pb.GetGauge().GetValue()
	}
	if !maps.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
