package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/agentsandbox/reconciler/cmd/sandbox-controller/serving"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// servers are the controller's HTTP servers. Each listens from the start,
// so a port in use stops the controller at once; controller-runtime's own
// servers (which have no read or write timeouts) are all off.
type servers struct {
	probes serving.Probes
	// webhook is nil with --enable-webhook=false.
	webhook *serving.Webhook
	// Listeners; nil when a server is off.
	metrics, probe, pprof net.Listener
	// certRunnable keeps the webhook certificate current.
	certRunnable manager.Runnable
	// webhookCertificate is the webhook's certificate source (nil with
	// --enable-webhook=false), for the certificate expiry metric.
	webhookCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// listen opens every server's listener and, for the webhook, gets its
// serving certificate ready (issued and injected in self mode).
func listen(o options, cfg *rest.Config, scheme *k8sruntime.Scheme, log logr.Logger) (*servers, error) {
	s := &servers{}
	var err error
	if s.metrics, err = serving.Listen(o.metricsAddr); err != nil {
		return nil, fmt.Errorf("--metrics-bind-address: %w", err)
	}
	if s.probe, err = serving.Listen(o.probeAddr); err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	if o.enablePprof {
		if s.pprof, err = serving.Listen(o.pprofAddr); err != nil {
			return nil, fmt.Errorf("--pprof-bind-address: %w", err)
		}
	}
	if !o.enableWebhook {
		return s, nil
	}
	l, err := serving.Listen(net.JoinHostPort(o.webhookHost, strconv.Itoa(o.webhookPort)))
	if err != nil {
		return nil, fmt.Errorf("--webhook-port: %w", err)
	}
	getCertificate, runnable, err := webhookCertificate(o, cfg, scheme, log)
	if err != nil {
		return nil, err
	}
	s.certRunnable, s.webhookCertificate = runnable, getCertificate
	s.webhook = serving.NewWebhook(l, getCertificate, map[string]int64{
		webhooks.ConvertPath:  webhooks.MaxConversionBodyBytes,
		webhooks.ValidatePath: webhooks.MaxAdmissionBodyBytes,
	})
	return s, nil
}

// webhookCertificate returns where the webhook's certificate comes from
// and the runnable that keeps it current: with --webhook-cert-management=self
// the controller's own (issued, stored in a Secret, watched), else the
// files in --webhook-cert-dir (reloaded when they change).
func webhookCertificate(o options, cfg *rest.Config, scheme *k8sruntime.Scheme, log logr.Logger) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), manager.Runnable, error) {
	if o.webhookCertManagement != "self" {
		w, err := certwatcher.New(filepath.Join(o.webhookCertDir, "tls.crt"), filepath.Join(o.webhookCertDir, "tls.key"))
		if err != nil {
			return nil, nil, fmt.Errorf("webhook serving certificate: %w", err)
		}
		return w.GetCertificate, w, nil
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	certs := &certs.Certs{Client: direct, Clientset: clientset, Namespace: o.controllerNamespace, CertDir: o.webhookCertDir}
	for _, h := range strings.Split(o.webhookHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			certs.ExtraHosts = append(certs.ExtraHosts, h)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	_, err = certs.Ensure(ctrl.LoggerInto(ctx, log))
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("webhook serving certificate: %w (the controller needs its namespace %s; or start it with --enable-webhook=false)", err, o.controllerNamespace)
	}
	return certs.GetCertificate, everyReplica(certs.Run), nil
}

// add adds the servers (except the webhook server, which is the manager's
// WebhookServer) to the manager; call it once every probe check is added.
func (s *servers) add(mgr manager.Manager, o options) error {
	runnables, err := s.runnables(o, mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// runnables are the servers other than the webhook's, and what keeps
// certificates current.
func (s *servers) runnables(o options, cfg *rest.Config, httpClient *http.Client) ([]manager.Runnable, error) {
	var runnables []manager.Runnable
	if s.metrics != nil {
		srv, watcher, err := serving.Metrics(s.metrics, serving.MetricsOptions{
			Secure: o.metricsSecure, CertDir: o.metricsCertDir,
			Config: cfg, HTTPClient: httpClient, Log: ctrl.Log.WithName("metrics"),
		})
		if err != nil {
			return nil, err
		}
		runnables = append(runnables, srv)
		if watcher != nil {
			runnables = append(runnables, watcher)
		}
	}
	if s.probe != nil {
		runnables = append(runnables, serving.New("health probe", s.probe, s.probes.Handler(), nil, serving.ProbeTimeouts))
	}
	if s.pprof != nil {
		runnables = append(runnables, serving.New("pprof", s.pprof, serving.Pprof(), nil, serving.PprofTimeouts))
	}
	if s.certRunnable != nil {
		runnables = append(runnables, s.certRunnable)
	}
	return runnables, nil
}
