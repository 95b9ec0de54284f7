package metrics

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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

// series is every metric a collector reports, as text sorted by labels.
func series(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan prometheus.Metric, 4096)
	c.Collect(ch)
	close(ch)
	var out []string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out = append(out, pb.String())
	}
	slices.Sort(out)
	return out
}

// TestSandboxCollectorCountsInPlace: counting in the informer's indexer
// reports what listing reports, and allocates next to nothing per Sandbox
// (listing copied each Sandbox's ~1 KiB struct into the list, every
// scrape).
func TestSandboxCollectorCountsInPlace(t *testing.T) {
	const n = 2000
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	builder := fake.NewClientBuilder().WithScheme(scheme(t))
	for i := range n {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", i%7), Name: fmt.Sprintf("sb-%d", i),
			Labels:      map[string]string{sandboxv1beta1.LabelLaunchType: []string{sandboxv1beta1.LaunchTypeCold, sandboxv1beta1.LaunchTypeWarm}[i%2]},
			Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: fmt.Sprintf("tpl-%d", i%3)},
		}}
		if i%5 != 0 {
			sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue}}
		}
		if err := indexer.Add(sb); err != nil {
			t.Fatal(err)
		}
		builder = builder.WithObjects(sb.DeepCopy())
	}
	listed := &SandboxCollector{Reader: builder.Build()}
	inPlace := &SandboxCollector{Indexer: func(context.Context) (toolscache.Indexer, error) { return indexer, nil }}
	want, got := series(t, listed), series(t, inPlace)
	if !slices.Equal(got, want) || len(got) < 2*3*2 {
		t.Fatalf("counted in place:\n%v\nlisted:\n%v", got, want)
	}

	collected := func(c prometheus.Collector) uint64 {
		ch := make(chan prometheus.Metric, 4096)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c.Collect(ch)
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	if perSandbox := collected(inPlace); perSandbox > 128 { // a pointer in the list, the series; a listed Sandbox is 1 KiB
		t.Errorf("a scrape counting in place allocated %d bytes per Sandbox", perSandbox)
	}
	t.Logf("in place %d, listing %d bytes per Sandbox", collected(inPlace), collected(listed))
}
