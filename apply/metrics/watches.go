package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
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

// requestInfo reads a request's Kubernetes verb and resource as the API
// server does (a GET with watch=true or 1 is the verb watch).
var requestInfo = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// CountWatches wraps a Kubernetes client's transport (rest.Config.Wrap) so
// that each watch request it sends is counted in Watches.
func CountWatches(next http.RoundTripper) http.RoundTripper {
	return watchCounter{next: next}
}

type watchCounter struct{ next http.RoundTripper }

func (w watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	// Only a GET that names watch is parsed: the rest pass untouched.
	if req.Method == http.MethodGet && req.URL != nil && strings.Contains(req.URL.RawQuery, "watch") {
		if info, err := requestInfo.NewRequestInfo(req); err == nil && info.IsResourceRequest && info.Verb == "watch" {
			resource := info.Resource
			if info.APIGroup != "" {
				resource += "." + info.APIGroup
			}
			Watches.WithLabelValues(watchResourceLabel.value(resource)).Inc()
		}
	}
	return w.next.RoundTrip(req)
}
