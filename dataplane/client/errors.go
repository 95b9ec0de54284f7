package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Errors a caller can test for with errors.Is. An *HTTPError matches
// ErrNotFound, ErrAccessDenied and ErrTooLarge by its status code.
var (
	// ErrNotFound: no such file in the sandbox (404), or no such claim or
	// Sandbox in the cluster.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the runtime refused a path outside its base directory
	// (403), or the router refused the credentials (401, 403).
	ErrAccessDenied = errors.New("access denied")
	// ErrTooLarge: an upload over the runtime's limit (413), or a command
	// whose output exceeds 16 MiB.
	ErrTooLarge = errors.New("too large")
	// ErrTimeout: the sandbox did not become ready, or a call did not
	// finish, before the deadline (the context's, or WithReadyTimeout).
	ErrTimeout = errors.New("timed out")
	// ErrDeleted: the claim or Sandbox was deleted while waiting for it.
	ErrDeleted = errors.New("deleted while waiting for it")
	// ErrRetriesExhausted: an idempotent call failed on every attempt; the
	// last attempt's error is wrapped too.
	ErrRetriesExhausted = errors.New("retries exhausted")
	// ErrClosed: the Sandbox was closed.
	ErrClosed = errors.New("sandbox closed")
	// ErrSuspended: the Sandbox is Suspended and did not opt in to resume
	// on connect (the router answers such calls 409, the SDK does not send
	// them); its message says how to opt in.
	ErrSuspended = errors.New("sandbox suspended")
)

// HTTPError is a response from the runtime or the router with a status
// other than 2xx.
type HTTPError struct {
	// Op is the call: run, write, read, list, exists or health.
	Op string
	// StatusCode is the HTTP status.
	StatusCode int
	// Detail is the "detail" (router, FastAPI) or "message" (runtime) of a
	// JSON error body, else the start of the body.
	Detail string
	// RequestID is the X-Request-ID the client sent, for the router's logs.
	RequestID string
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s: %d %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg + " (request " + e.RequestID + ")"
}

// Is reports whether the status code stands for one of the sentinel errors.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrAccessDenied:
		return e.StatusCode == http.StatusForbidden || e.StatusCode == http.StatusUnauthorized
	case ErrTooLarge:
		return e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrSuspended:
		return e.StatusCode == http.StatusConflict && strings.Contains(e.Detail, " is suspended")
	}
	return false
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 4 << 10

// errorDetail extracts the message of an error body: {"detail": ...}
// (router, FastAPI; a string or any JSON value) or {"message": ...}
// (runtime), else the body itself, cut short.
func errorDetail(body []byte) string {
	var v struct {
		Detail  json.RawMessage `json:"detail"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var s string
		switch {
		case len(v.Detail) > 0 && json.Unmarshal(v.Detail, &s) == nil:
			return s
		case len(v.Detail) > 0:
			return string(v.Detail)
		case v.Message != "":
			return v.Message
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return s
}

// permanent marks a connection error that retrying cannot fix (the API
// server refused the port-forward: no such pod, forbidden, ...).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }
