package router

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// Reasons label a refusal in logs and metrics (a small, fixed set).
const (
	ReasonBadRequest       = "bad_request"
	ReasonUnauthenticated  = "unauthenticated"
	ReasonForbidden        = "forbidden"
	ReasonAuthError        = "auth_error"
	ReasonThrottled        = "auth_throttled"
	ReasonNotFound         = "not_found"
	ReasonNotReady         = "not_ready"
	ReasonWarmMember       = "warm_member"
	ReasonUIDMismatch      = "uid_mismatch"
	ReasonPodIPMismatch    = "pod_ip_mismatch"
	ReasonAddressForbidden = "address_forbidden"
	ReasonCacheError       = "cache_error"
	ReasonTooLarge         = "too_large"
	ReasonSuspended        = "suspended"
	ReasonResumeTimeout    = "resume_timeout"
	ReasonResumeFailed     = "resume_failed"
)

// Error is a refusal the router answers itself: an HTTP status and the
// {"detail": ...} body of upstream's router.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Detail is the message the client sees.
	Detail string
	// Reason labels the refusal in logs and metrics (Reason* constants).
	Reason string
	// Retry marks a state that may change in a moment (a cache that is
	// behind: a Sandbox just made, a Pod just Ready, a claim just taken);
	// the router looks again for a short while before answering.
	Retry bool
	// Resume, when set, names a Sandbox that opted in to resume on
	// connect: the handler resumes it (Suspended) or waits for it (not
	// ready yet) instead of answering.
	Resume *Resumable
}

// Resumable is a Sandbox that opted in to resume on connect, as a refusal
// found it.
type Resumable struct {
	// Key names the Sandbox (with its UID: a resume is never made on a
	// namesake's behalf).
	Key resume.Key
	// Suspended: its spec.operatingMode is Suspended and a resume sets it
	// Running. Otherwise it is Running but not routable yet (starting, or
	// resumed by someone else) and a request waits for it.
	Suspended bool
}

func (e *Error) Error() string { return e.Detail }

func badRequest(detail string) *Error {
	return &Error{Status: http.StatusBadRequest, Detail: detail, Reason: ReasonBadRequest}
}

// AsError returns err as an *Error, or a 502 for any other error.
func AsError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return &Error{Status: http.StatusBadGateway, Detail: err.Error(), Reason: ReasonCacheError}
}

// WriteError answers with e's status and {"detail": e.Detail}.
func WriteError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-router"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, struct {
		Detail string `json:"detail"`
	}{e.Detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
