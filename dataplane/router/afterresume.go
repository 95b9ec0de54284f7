package router

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// maxReplayBody is the largest request body kept so that a request to a
// just-resumed Sandbox can be sent again when its server is not listening
// yet; a larger one is sent once.
const maxReplayBody = 1 << 20

// refusedRetry is how long afterResume waits between tries.
const refusedRetry = 100 * time.Millisecond

// transportFor is the round tripper of one proxied request: the
// transport's, and for a Sandbox the request waited for, one that tries a
// refused connection again until the resume timeout.
func (h *Handler) transportFor(r *http.Request, ep Endpoint) http.RoundTripper {
	rt := h.o.Transport.RoundTripper()
	if !ep.Resumed || isUpgrade(r) {
		return rt
	}
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength < 0 || r.ContentLength > maxReplayBody {
			return rt
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReplayBody+1))
		if err != nil || int64(len(body)) != r.ContentLength {
			// Cannot be read whole: send what there is, once, and let
			// the proxy report the error.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			return rt
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return &afterResume{next: rt, until: time.Now().Add(h.o.ResumeTimeout)}
}

// afterResume sends a request to a Sandbox that was just resumed (or
// started) again while its server refuses connections: a Pod is Ready once
// its containers run (without a readiness probe), a moment before the
// server in it listens. A refused connection never reached the server, so
// sending again is safe for any method.
type afterResume struct {
	next  http.RoundTripper
	until time.Time
}

func (a *afterResume) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := a.next.RoundTrip(req)
		if err == nil || !refused(err) || time.Now().Add(refusedRetry).After(a.until) {
			return resp, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return resp, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return resp, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		select {
		case <-req.Context().Done():
			return resp, err
		case <-time.After(refusedRetry):
		}
	}
}

// refused reports a connection the Pod refused: nothing listens on the
// port (yet). Through a port-forward, the kubelet's message says so; kwok
// (a local cluster) says it has no forward for the port until the Pod's
// PortForward object exists.
func refused(err error) bool {
	msg := err.Error()
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "no forward found for port")
}
