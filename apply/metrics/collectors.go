package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// maxWarmPools caps the warm pools reported one by one; the rest are
// summed as namespace and warm_pool "other".
const maxWarmPools = 200

var (
	warmPoolReplicasDesc = prometheus.NewDesc("agent_sandbox_warm_pool_replicas",
		"Members a SandboxWarmPool asks for (spec.replicas), by namespace and pool.",
		[]string{"namespace", "warm_pool"}, nil)
	warmPoolReadyDesc = prometheus.NewDesc("agent_sandbox_warm_pool_ready_replicas",
		"Members of a SandboxWarmPool whose Sandbox is Ready, ready to be claimed (status.readyReplicas), by namespace and pool.",
		[]string{"namespace", "warm_pool"}, nil)
)

// WarmPoolCollector reports the depth of every warm pool, from the
// controller's cache at scrape time: agent_sandbox_warm_pool_replicas and
// agent_sandbox_warm_pool_ready_replicas.
type WarmPoolCollector struct {
	Reader client.Reader
}

// Describe implements prometheus.Collector.
func (c *WarmPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- warmPoolReplicasDesc
	ch <- warmPoolReadyDesc
}

// Collect implements prometheus.Collector.
func (c *WarmPoolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list extv1beta1.SandboxWarmPoolList
	if err := c.Reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil { // read only
		ch <- prometheus.NewInvalidMetric(warmPoolReplicasDesc, err)
		ch <- prometheus.NewInvalidMetric(warmPoolReadyDesc, err)
		return
	}
	type key struct{ ns, name string }
	type depth struct{ want, ready int }
	pools := map[key]depth{}
	sizes := map[string]int{}
	for i := range list.Items {
		p := &list.Items[i]
		want := 1 // the API's default
		if p.Spec.Replicas != nil {
			want = int(*p.Spec.Replicas)
		}
		k := key{truncate(p.Namespace), truncate(p.Name)}
		pools[k] = depth{want + pools[k].want, int(p.Status.ReadyReplicas) + pools[k].ready}
		sizes[k.ns+"/"+k.name] = want
	}
	keep := topValues(sizes, maxWarmPools)
	bounded := map[key]depth{}
	for k, d := range pools {
		if !keep[k.ns+"/"+k.name] {
			k = key{Other, Other}
		}
		b := bounded[k]
		bounded[k] = depth{b.want + d.want, b.ready + d.ready}
	}
	for k, d := range bounded {
		ch <- prometheus.MustNewConstMetric(warmPoolReplicasDesc, prometheus.GaugeValue, float64(d.want), k.ns, k.name)
		ch <- prometheus.MustNewConstMetric(warmPoolReadyDesc, prometheus.GaugeValue, float64(d.ready), k.ns, k.name)
	}
}

var certificateExpiryDesc = prometheus.NewDesc("agent_sandbox_webhook_certificate_expiry_timestamp_seconds",
	"When the webhook's serving certificate (the one served now) expires, in seconds since the epoch.", nil, nil)

// CertificateCollector reports when the webhook's serving certificate
// expires, read at scrape time from the function the webhook server gets
// its certificate from (self-issued or provided).
type CertificateCollector struct {
	Get func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Describe implements prometheus.Collector.
func (c *CertificateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certificateExpiryDesc }

// Collect implements prometheus.Collector.
func (c *CertificateCollector) Collect(ch chan<- prometheus.Metric) {
	cert, err := c.Get(nil)
	if err == nil && (cert == nil || len(cert.Certificate) == 0) {
		return // none yet
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(certificateExpiryDesc, err)
		return
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			ch <- prometheus.NewInvalidMetric(certificateExpiryDesc, err)
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(certificateExpiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}

// SandboxCollector reports agent_sandboxes, the number of Sandboxes by
// namespace, Ready status, launch type, template and owner kind, counted
// at scrape time where the controller's cache holds them: Indexer is the
// informer's indexer (InformerIndexer), whose objects are read, never
// copied (listing them into a SandboxList copied each one's 1 KiB struct:
// 5 MiB of garbage per scrape at 5000 Sandboxes).
type SandboxCollector struct {
	Indexer func(context.Context) (toolscache.Indexer, error)
}

// InformerIndexer returns the indexer of the informer cache c keeps for
// obj's kind, for SandboxCollector.Indexer (an error if the informer has
// none, as an informer that is not client-go's shared informer).
func InformerIndexer(c cache.Informers, obj client.Object) func(context.Context) (toolscache.Indexer, error) {
	return func(ctx context.Context) (toolscache.Indexer, error) {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, err
		}
		if ix, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
			return ix.GetIndexer(), nil
		}
		return nil, fmt.Errorf("the %T informer has no indexer", inf)
	}
}

var sandboxesDesc = prometheus.NewDesc("agent_sandboxes",
	"Sandboxes by namespace, Ready condition status, launch type, template and owner kind.",
	[]string{"namespace", "ready_condition", "launch_type", "sandbox_template", "owned_by"}, nil)

// Describe implements prometheus.Collector.
func (c *SandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

// Collect implements prometheus.Collector.
func (c *SandboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ix, err := c.Indexer(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		return
	}
	type key struct{ ns, ready, launch, tpl, owner string }
	counts := map[key]int{}
	byNamespace, byTemplate, byOwner := map[string]int{}, map[string]int{}, map[string]int{}
	for _, o := range ix.List() {
		sb, ok := o.(*sandboxv1beta1.Sandbox) // the cache's own: read only
		if !ok {
			continue
		}
		ready := string(metav1.ConditionUnknown)
		for _, cond := range sb.Status.Conditions {
			if cond.Type == sandboxv1beta1.ConditionReady {
				ready = knownOr(string(cond.Status), string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown))
			}
		}
		owner := none
		if ref := metav1.GetControllerOfNoCopy(sb); ref != nil {
			owner = truncate(ref.Kind)
		}
		k := key{truncate(sb.Namespace), ready, launchType(sb), truncate(template(sb)), owner}
		counts[k]++
		byNamespace[k.ns]++
		byTemplate[k.tpl]++
		byOwner[k.owner]++
	}
	// The gauge is computed afresh at every scrape: the most populated
	// values keep their series, the rest are summed as other.
	nsKeep, tplKeep, ownerKeep := topValues(byNamespace, maxNamespaces), topValues(byTemplate, maxTemplates), topValues(byOwner, maxKinds)
	bounded := map[key]int{}
	for k, n := range counts {
		if !nsKeep[k.ns] {
			k.ns = Other
		}
		if !tplKeep[k.tpl] {
			k.tpl = Other
		}
		if !ownerKeep[k.owner] {
			k.owner = Other
		}
		bounded[k] += n
	}
	for k, n := range bounded {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), k.ns, k.ready, k.launch, k.tpl, k.owner)
	}
}
