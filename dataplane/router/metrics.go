package router

import (
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the router's Prometheus metrics. Labels are small fixed
// sets (no namespace or sandbox names), so a cluster with many sandboxes
// costs Prometheus nothing more. A nil *Metrics records nothing.
type Metrics struct {
	requests           *prometheus.CounterVec
	duration           *prometheus.HistogramVec
	inflight           prometheus.Gauge
	connections        prometheus.Gauge
	resolutionFailures *prometheus.CounterVec
	authFailures       *prometheus.CounterVec
	reviews            *prometheus.CounterVec
	upstreamErrors     *prometheus.CounterVec
	upstreamRetries    *prometheus.CounterVec
	portForwards       prometheus.Gauge
	prewarms           *prometheus.CounterVec
	resumes            *prometheus.CounterVec
	resumeDuration     prometheus.Histogram
	resumeWaits        prometheus.Counter
	resolveWaits       prometheus.Histogram
	activityWrites     *prometheus.CounterVec
}

// Reviews the TokenReview authorizer asks for, and their results
// (sandbox_router_auth_reviews_total).
const (
	reviewToken     = "token"
	reviewAccess    = "access"
	reviewAllowed   = "allowed"
	reviewRefused   = "refused"
	reviewError     = "error"
	reviewThrottled = "throttled"
)

// Results of a resume on connect (sandbox_router_resumes_total).
const (
	resumeResumed = "resumed"
	resumeTimeout = "timeout"
	resumeError   = "error"
)

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_requests_total",
			Help: "Requests answered, by status class (1xx for WebSocket upgrades, 2xx, 3xx, 4xx, 5xx).",
		}, []string{"code_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_router_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its response (of a WebSocket session for upgrades), by status class.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180, 600},
		}, []string{"code_class"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_inflight_requests",
			Help: "Requests being served, WebSocket sessions included.",
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_active_connections",
			Help: "Client connections open on the proxy port (WebSocket sessions included).",
		}),
		resolutionFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_resolution_failures_total",
			Help: "Requests the router could not route to a sandbox, by reason (not_found, not_ready, warm_member, uid_mismatch, pod_ip_mismatch, address_forbidden, cache_error, suspended, resume_timeout, resume_failed).",
		}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_auth_failures_total",
			Help: "Requests refused by authentication or authorization, by reason (unauthenticated, forbidden, auth_error, auth_throttled).",
		}, []string{"reason"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_auth_reviews_total",
			Help: "Reviews the router asked the API server for (review: token for TokenReviews, access for SubjectAccessReviews) by result (allowed, refused, error), and those the review budget held back (throttled: never sent).",
		}, []string{"review", "result"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_errors_total",
			Help: "Requests that failed between the router and the sandbox, by reason (dial: the connection was never made or the Pod refused it, after any retries; timeout; other).",
		}, []string{"reason"}),
		upstreamRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_retries_total",
			Help: "Requests sent to a sandbox again after their connection failed before the sandbox got them (--upstream-max-retries), by the sandbox's namespace.",
		}, []string{"sandbox_namespace"}),
		portForwards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_port_forwards",
			Help: "Port-forward connections open to sandbox Pods (--transport=port-forward).",
		}),
		prewarms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_port_forward_prewarms_total",
			Help: "Port-forward connections dialled ahead to Ready, unclaimed warm pool members' Pods (--port-forward-prewarm), by result (dialled, failed).",
		}, []string{"result"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_resumes_total",
			Help: "Resumes on connect the router made (one per Sandbox however many requests waited for it), by result (resumed, timeout, error).",
		}, []string{"result"}),
		resumeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandbox_router_resume_duration_seconds",
			Help:    "Time from a resume on connect's write (spec.operatingMode Running) to the Sandbox being routable.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300},
		}),
		resumeWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandbox_router_requests_waited_for_resume_total",
			Help: "Requests that waited for their Sandbox to resume (or, opted in to resume on connect, to start).",
		}),
		resolveWaits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandbox_router_resolve_wait_seconds",
			Help:    "Time a request waited for the router's cache to show its Sandbox routable, of the requests that waited (a client a moment ahead of the router's watch); resumes are sandbox_router_resume_duration_seconds.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		activityWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_activity_writes_total",
			Help: "Writes of the last-activity annotation of Sandboxes with idle suspend, by result (ok, error, gone).",
		}, []string{"result"}),
	}
	// Every result's series exists from the start (at 0), so that rates
	// and alerts over them work before the first resume.
	for _, r := range []string{resumeResumed, resumeTimeout, resumeError} {
		m.resumes.WithLabelValues(r)
	}
	for _, r := range []string{prewarmDialled, prewarmFailed} {
		m.prewarms.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.duration, m.inflight, m.connections, m.resolutionFailures, m.authFailures, m.reviews, m.upstreamErrors, m.upstreamRetries, m.portForwards, m.prewarms,
		m.resumes, m.resumeDuration, m.resumeWaits, m.resolveWaits, m.activityWrites)
	return m
}

func codeClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

func (m *Metrics) request(status int, seconds float64) {
	if m == nil {
		return
	}
	c := codeClass(status)
	m.requests.WithLabelValues(c).Inc()
	m.duration.WithLabelValues(c).Observe(seconds)
}

func (m *Metrics) inflightAdd(d float64) {
	if m != nil {
		m.inflight.Add(d)
	}
}

// refused counts a refusal under resolution or auth, by its reason.
func (m *Metrics) refused(e *Error) {
	if m == nil {
		return
	}
	switch e.Reason {
	case ReasonUnauthenticated, ReasonForbidden, ReasonAuthError, ReasonThrottled:
		m.authFailures.WithLabelValues(e.Reason).Inc()
	case ReasonBadRequest, ReasonTooLarge:
	default:
		m.resolutionFailures.WithLabelValues(e.Reason).Inc()
	}
}

func (m *Metrics) review(review, result string) {
	if m != nil {
		m.reviews.WithLabelValues(review, result).Inc()
	}
}

func (m *Metrics) upstreamError(reason string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(reason).Inc()
	}
}

// upstreamRetried counts a request sent again to a sandbox in namespace.
func (m *Metrics) upstreamRetried(namespace string) {
	if m != nil {
		m.upstreamRetries.WithLabelValues(namespace).Inc()
	}
}

// resumed counts a resume's result and, when it resumed, its latency.
func (m *Metrics) resumed(result string, seconds float64) {
	if m == nil {
		return
	}
	m.resumes.WithLabelValues(result).Inc()
	if result == resumeResumed {
		m.resumeDuration.Observe(seconds)
	}
}

func (m *Metrics) resolveWaited(seconds float64) {
	if m != nil {
		m.resolveWaits.Observe(seconds)
	}
}

func (m *Metrics) resumeWaited() {
	if m != nil {
		m.resumeWaits.Inc()
	}
}

func (m *Metrics) activityWrite(result string) {
	if m != nil {
		m.activityWrites.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) portForwardOpened() {
	if m != nil {
		m.portForwards.Inc()
	}
}

func (m *Metrics) portForwardPrewarmed(result string) {
	if m != nil {
		m.prewarms.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) portForwardClosed() {
	if m != nil {
		m.portForwards.Dec()
	}
}

// ConnState tracks open client connections; set it as an http.Server's
// ConnState.
func (m *Metrics) ConnState(_ net.Conn, s http.ConnState) {
	if m == nil {
		return
	}
	switch s {
	case http.StateNew:
		m.connections.Inc()
	case http.StateClosed:
		m.connections.Dec()
	case http.StateHijacked:
		// The handler owns the connection now (a WebSocket session); the
		// handler decrements when it ends.
	}
}

// hijackedClosed counts the end of a connection the handler hijacked.
func (m *Metrics) hijackedClosed() {
	if m != nil {
		m.connections.Dec()
	}
}
