package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Watches counts the watches the controller's clients opened. client-go's
// rest_client_requests_total counts each one as a GET, the same as a read;
// a watch is opened at start and again each time the API server ends one
// (every 5 to 10 minutes per informer, by client-go's timeout), so an idle
// controller's GETs there are these renewals, and this tells them apart.
var Watches = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "agent_sandbox_client_watches_total",
	Help: "Watches the controller's API clients opened (HTTP GETs with watch=true, also counted as GETs in rest_client_requests_total), by resource.",
}, []string{"resource"})

var watchResourceLabel = newBoundedLabel(maxKinds)

// CountWatches wraps a Kubernetes client's transport (rest.Config.Wrap) so
// that each watch request it sends is counted in Watches.
func CountWatches(next http.RoundTripper) http.RoundTripper {
	return watchCounter{next: next}
}

type watchCounter struct{ next http.RoundTripper }

func (w watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && req.URL != nil {
		if v := req.URL.Query().Get("watch"); v == "true" || v == "1" {
			Watches.WithLabelValues(watchResourceLabel.value(WatchedResource(req.URL.Path))).Inc()
		}
	}
	return w.next.RoundTrip(req)
}

// WatchedResource names the resource a request path lists or watches, as
// "pods" for the core group and "sandboxes.agents.x-k8s.io" for others;
// Other for a path that is not a Kubernetes API path.
func WatchedResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // api/v1/...
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:] // apis/<group>/<version>/...
	default:
		return Other
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/<ns>/<resource>
	}
	if len(parts) == 0 || parts[0] == "" {
		return Other
	}
	if group == "" {
		return parts[0]
	}
	return parts[0] + "." + group
}
