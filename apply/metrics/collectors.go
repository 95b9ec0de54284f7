package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
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
