package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Request body caps. The API server accepts request bodies of at most
// 3 MiB, so an AdmissionReview (the object and, on update, the old object)
// is at most twice that plus its envelope: controller-runtime's admission
// handler refuses more than 7 MiB too. A ConversionReview holds one object
// for a get, a write or a watch event, but every object of a list response
// at once, so it is allowed more (about 10,000 Sandboxes of 3 KiB).
const (
	MaxAdmissionBodyBytes  int64 = 7 << 20
	MaxConversionBodyBytes int64 = 32 << 20
)

// BodyTooLargeError is a request body over its cap.
type BodyTooLargeError struct {
	Path  string
	Limit int64
	// Length is the declared Content-Length, -1 when unknown.
	Length int64
}

func (e *BodyTooLargeError) Error() string {
	if e.Length >= 0 {
		return fmt.Sprintf("request body of %d bytes for %s is over the limit of %d bytes", e.Length, e.Path, e.Limit)
	}
	return fmt.Sprintf("request body for %s is over the limit of %d bytes", e.Path, e.Limit)
}

// readBody reads a request body of at most limit bytes. A body declared
// larger is refused before any of it is read; one that turns out larger
// is refused once limit+1 bytes have been read.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	tooLarge := &BodyTooLargeError{Path: r.URL.Path, Limit: limit, Length: r.ContentLength}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, nil
}

// writeBodyError answers a body that could not be read.
func writeBodyError(w http.ResponseWriter, err error) {
	if tooLarge, ok := errors.AsType[*BodyTooLargeError](err); ok {
		w.Header().Set("Connection", "close")
		http.Error(w, tooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
}

// BodyBudget bounds the bytes of request bodies being handled at once, so
// that many concurrent large requests cannot exhaust the controller's
// memory: a request waits (up to Wait) for its share, then is refused.
type BodyBudget struct {
	sem   *semaphore.Weighted
	total int64
	Wait  time.Duration
}

// NewBodyBudget returns a budget of total bytes.
func NewBodyBudget(total int64) *BodyBudget {
	return &BodyBudget{sem: semaphore.NewWeighted(total), total: total, Wait: 10 * time.Second}
}

// LimitBody serves h only for bodies of at most limit bytes, answering
// 413 Request Entity Too Large without reading a body declared larger, and
// within budget (nil: none). A body of unknown length is cut at limit, and
// takes limit bytes of the budget.
func LimitBody(limit int64, budget *BodyBudget, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			writeBodyError(w, &BodyTooLargeError{Path: r.URL.Path, Limit: limit, Length: r.ContentLength})
			return
		}
		if r.ContentLength < 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if budget != nil {
			weight := limit
			if r.ContentLength >= 0 {
				weight = max(r.ContentLength, 1)
			}
			weight = min(weight, budget.total)
			ctx, cancel := context.WithTimeout(r.Context(), budget.Wait)
			err := budget.sem.Acquire(ctx, weight)
			cancel()
			if err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many request bytes in flight; retry later", http.StatusTooManyRequests)
				return
			}
			defer budget.sem.Release(weight)
		}
		h.ServeHTTP(w, r)
	})
}
