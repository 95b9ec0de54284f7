package webhooks

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// zeros is an endless body that counts what was read of it.
type zeros struct{ read atomic.Int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

func TestOversizeBodies(t *testing.T) {
	admission := LimitBody(MaxAdmissionBodyBytes, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What controller-runtime's admission handler does: read it all.
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	}))
	for _, tc := range []struct {
		name     string
		handler  http.Handler
		path     string
		length   int64 // declared; -1: chunked
		maxRead  int64
		wantCode int
	}{
		{"conversion declared too large", Converter{}, ConvertPath, MaxConversionBodyBytes + 1, 0, http.StatusRequestEntityTooLarge},
		{"conversion of unknown length", Converter{}, ConvertPath, -1, MaxConversionBodyBytes + 64<<10, http.StatusRequestEntityTooLarge},
		{"admission declared too large", admission, ValidatePath, MaxAdmissionBodyBytes + 1, 0, http.StatusRequestEntityTooLarge},
		{"admission of unknown length", admission, ValidatePath, -1, MaxAdmissionBodyBytes + 64<<10, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &zeros{}
			req := httptest.NewRequest(http.MethodPost, tc.path, body)
			req.ContentLength = tc.length
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Errorf("status %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tc.wantCode)
			}
			if n := body.read.Load(); n > tc.maxRead {
				t.Errorf("read %d bytes of the body, want at most %d", n, tc.maxRead)
			}
			if tc.length >= 0 && !strings.Contains(rec.Body.String(), "over the limit") {
				t.Errorf("message %q does not say the body is over the limit", rec.Body.String())
			}
		})
	}
}

func TestBodyBudget(t *testing.T) {
	budget := NewBodyBudget(100)
	budget.Wait = 50 * time.Millisecond
	release := make(chan struct{})
	entered := make(chan struct{})
	h := LimitBody(80, budget, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 80 { // the first request holds 80 bytes of the budget
			close(entered)
			<-release
		}
	}))
	post := func(n int) *http.Request {
		return httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(strings.Repeat("a", n)))
	}
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), post(80)); close(done) }()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, post(30)) // 80 + 30 > 100: waits, then is refused
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("over budget: status %d, want 429", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, post(20)) // fits
	if rec.Code != http.StatusOK {
		t.Errorf("within budget: status %d", rec.Code)
	}
	close(release)
	<-done
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, post(30)) // the budget is back
	if rec.Code != http.StatusOK {
		t.Errorf("after release: status %d", rec.Code)
	}
}
