package metrics

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

func TestWarmPoolCollector(t *testing.T) {
	s := scheme(t)
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pool := func(ns, name string, replicas *int32, ready int32) *extv1beta1.SandboxWarmPool {
		return &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: replicas}, Status: extv1beta1.SandboxWarmPoolStatus{ReadyReplicas: ready}}
	}
	c := &WarmPoolCollector{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(
		pool("a", "python", ptr.To[int32](3), 2), pool("b", "empty", ptr.To[int32](2), 0), pool("b", "default-size", nil, 1),
	).WithStatusSubresource(&extv1beta1.SandboxWarmPool{}).Build()}
	want := `
# HELP agent_sandbox_warm_pool_ready_replicas Members of a SandboxWarmPool whose Sandbox is Ready, ready to be claimed (status.readyReplicas), by namespace and pool.
# TYPE agent_sandbox_warm_pool_ready_replicas gauge
agent_sandbox_warm_pool_ready_replicas{namespace="a",warm_pool="python"} 2
agent_sandbox_warm_pool_ready_replicas{namespace="b",warm_pool="default-size"} 1
agent_sandbox_warm_pool_ready_replicas{namespace="b",warm_pool="empty"} 0
# HELP agent_sandbox_warm_pool_replicas Members a SandboxWarmPool asks for (spec.replicas), by namespace and pool.
# TYPE agent_sandbox_warm_pool_replicas gauge
agent_sandbox_warm_pool_replicas{namespace="a",warm_pool="python"} 3
agent_sandbox_warm_pool_replicas{namespace="b",warm_pool="default-size"} 1
agent_sandbox_warm_pool_replicas{namespace="b",warm_pool="empty"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestWarmPoolCollectorBounded(t *testing.T) {
	s := scheme(t)
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for i := range maxWarmPools + 50 {
		b = b.WithObjects(&extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p-%d", i)},
			Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1)}})
	}
	c := &WarmPoolCollector{Reader: b.Build()}
	got := labelValues(t, c, "warm_pool")
	if len(got) != maxWarmPools+1 {
		t.Errorf("%d pools reported, want %d and other", len(got), maxWarmPools)
	}
	// Each pool is counted twice (wanted and ready series) in labelValues.
	if got[Other] != 50 {
		t.Errorf("other sums %v, want 50 wanted members", got[Other])
	}
}

func TestCertificateCollector(t *testing.T) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("webhook", []net.IP{{127, 0, 0, 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := &CertificateCollector{Get: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }}
	got := testutil.ToFloat64(c)
	if want := float64(pair.Leaf.NotAfter.Unix()); got != want {
		t.Errorf("expiry = %v, want %v", got, want)
	}
	if left := time.Until(time.Unix(int64(got), 0)); left < 300*24*time.Hour {
		t.Errorf("a fresh certificate expires in %s", left)
	}
	// No certificate yet: no series; an error: an invalid metric.
	if n := testutil.CollectAndCount(&CertificateCollector{Get: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }}); n != 0 {
		t.Errorf("%d series without a certificate", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&CertificateCollector{Get: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, errors.New("boom") }})
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("gather with a failing certificate source: %v", err)
	}
}
