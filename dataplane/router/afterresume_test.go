package router

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

type flakyRT struct {
	fails  int
	errFor func(i int) error
	calls  int
	bodies []string
}

func (f *flakyRT) RoundTrip(req *http.Request) (*http.Response, error) {
	f.calls++
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		f.bodies = append(f.bodies, string(b))
	}
	if f.calls <= f.fails {
		return nil, f.errFor(f.calls)
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

func TestAfterResumeRetriesRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		calls int
		ok    bool
	}{
		{"direct refused", &netErr{syscall.ECONNREFUSED}, 3, true},
		{"kubelet refused", errors.New("port-forward to ns/p:8888: error forwarding port 8888: dial tcp4 127.0.0.1:8888: connect: connection refused"), 3, true},
		{"kwok, no forward yet", errors.New(`error forwarding port 8888 to pod p/ns, uid : no forward found for port 8888 in pod "ns/p"`), 3, true},
		{"other errors are not retried", errors.New("EOF"), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &flakyRT{fails: 2, errFor: func(int) error { return tc.err }}
			a := &afterResume{next: rt, until: time.Now().Add(10 * time.Second)}
			req, _ := http.NewRequest(http.MethodPost, "http://sandbox/execute", strings.NewReader(`{"command":"echo hi"}`))
			body := `{"command":"echo hi"}`
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			resp, err := a.RoundTrip(req)
			if (err == nil) != tc.ok || rt.calls != tc.calls {
				t.Fatalf("RoundTrip = %v after %d calls; want ok=%v after %d", err, rt.calls, tc.ok, tc.calls)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
			for i, b := range rt.bodies {
				if b != body {
					t.Errorf("try %d sent body %q; want %q each time", i, b, body)
				}
			}
		})
	}
}

func TestAfterResumeGivesUp(t *testing.T) {
	rt := &flakyRT{fails: 1 << 30, errFor: func(i int) error { return fmt.Errorf("try %d: connection refused", i) }}
	a := &afterResume{next: rt, until: time.Now().Add(350 * time.Millisecond)}
	req, _ := http.NewRequest(http.MethodGet, "http://sandbox/", nil)
	began := time.Now()
	if _, err := a.RoundTrip(req); err == nil || time.Since(began) > 2*time.Second {
		t.Fatalf("RoundTrip = %v after %s; want the refusal once the deadline passed", err, time.Since(began))
	}
	if rt.calls < 2 {
		t.Errorf("%d tries before the deadline; want a few", rt.calls)
	}
	// A body that cannot be sent again is sent once.
	rt = &flakyRT{fails: 1, errFor: func(int) error { return errors.New("connection refused") }}
	a = &afterResume{next: rt, until: time.Now().Add(10 * time.Second)}
	req, _ = http.NewRequest(http.MethodPost, "http://sandbox/upload", io.NopCloser(strings.NewReader("data")))
	req.GetBody = nil
	if _, err := a.RoundTrip(req); err == nil || rt.calls != 1 {
		t.Fatalf("a body without GetBody: %v after %d calls; want the error, one call", err, rt.calls)
	}
}

type netErr struct{ errno syscall.Errno }

func (e *netErr) Error() string { return "dial tcp 10.0.0.1:8888: " + e.errno.Error() }
func (e *netErr) Unwrap() error { return e.errno }
