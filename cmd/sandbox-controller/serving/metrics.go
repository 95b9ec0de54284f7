package serving

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// Secure metrics authenticate the caller's bearer token with a
// TokenReview and authorize it with a SubjectAccessReview (a get of the
// /metrics non-resource URL, granted by the metrics-reader ClusterRole).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsOptions configure the metrics server.
type MetricsOptions struct {
	// Secure serves HTTPS and only to callers the API server authenticates
	// and allows to get /metrics.
	Secure bool
	// CertDir holds tls.crt and tls.key for secure serving (reloaded when
	// they change); empty: a self-signed certificate made at start.
	CertDir string
	// Config and HTTPClient reach the API server for the reviews.
	Config     *rest.Config
	HTTPClient *http.Client
	Log        logr.Logger
}

// Metrics returns the metrics server on l (controller-runtime's registry on
// /metrics) and, with a CertDir, the runnable that reloads the certificate.
func Metrics(l net.Listener, o MetricsOptions) (*manager.Server, manager.Runnable, error) {
	metrics := promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	if !o.Secure {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics)
		return New("metrics", l, mux, nil, MetricsTimeouts), nil, nil
	}
	filter, err := filters.WithAuthenticationAndAuthorization(o.Config, o.HTTPClient)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics authentication: %w", err)
	}
	h, err := filter(o.Log, metrics)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics authentication: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)

	var watcher *certwatcher.CertWatcher
	var getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if o.CertDir != "" {
		watcher, err = certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
		if err != nil {
			return nil, nil, fmt.Errorf("metrics certificate: %w", err)
		}
		getCertificate = watcher.GetCertificate
	} else {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{{127, 0, 0, 1}}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics certificate: %w", err)
		}
		getCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	srv := New("metrics", l, mux, TLSConfig(getCertificate), MetricsTimeouts)
	if watcher == nil {
		return srv, nil, nil
	}
	return srv, watcher, nil
}
