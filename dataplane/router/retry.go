package router

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// maxReplayBody is the largest request body kept so that a request whose
// connection the sandbox refused can be sent again; a larger one, or one
// of unknown length, is sent once.
const maxReplayBody = 1 << 20

// refusedRetry is how long a request to a just-resumed Sandbox waits
// between tries.
const refusedRetry = 100 * time.Millisecond

// UpstreamRetries is how a proxied request whose connection to the sandbox
// failed before the sandbox got it (a dial-class failure: the connection
// refused, the address not resolved, the port-forward stream not opened)
// is sent again, as upstream's router does (--upstream-max-retries).
type UpstreamRetries struct {
	// Max is how many times a request is sent again; zero: never.
	Max int
	// Initial is the wait before the first retry; each next wait doubles,
	// up to MaxDelay.
	Initial, MaxDelay time.Duration
}

// DefaultUpstreamRetries are upstream's defaults: three retries after
// 200, 400 and 800 ms.
var DefaultUpstreamRetries = UpstreamRetries{Max: 3, Initial: 200 * time.Millisecond, MaxDelay: 800 * time.Millisecond}

// wait is the pause before retry i (0, 1, ...), false past Max.
func (u UpstreamRetries) wait(i int) (time.Duration, bool) {
	if i >= u.Max {
		return 0, false
	}
	d := max(u.Initial, 0)
	for ; i > 0 && d < u.MaxDelay; i-- {
		d *= 2
	}
	return min(d, max(u.MaxDelay, u.Initial)), true
}

// transportFor is the round tripper of one proxied request: the
// transport's, wrapped so that a dial-class failure is tried again
// (UpstreamRetries; for a Sandbox the request waited for, every
// refusedRetry until the resume timeout).
func (h *Handler) transportFor(r *http.Request, ep Endpoint) http.RoundTripper {
	rt := h.o.Transport.RoundTripper()
	if !ep.Resumed && h.o.UpstreamRetries.Max <= 0 {
		return rt
	}
	switch {
	case r.ContentLength < 0 || r.ContentLength > maxReplayBody:
		if r.Body != nil && r.Body != http.NoBody {
			return rt
		}
	case r.ContentLength == 0: // none (a server's request says -1 for one of unknown length)
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	default:
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
	u := &upstreamRetry{next: rt, retries: h.o.UpstreamRetries, onRetry: func() { h.o.Metrics.upstreamRetried(ep.Namespace) }}
	if ep.Resumed {
		// A Pod is Ready once its containers run (without a readiness
		// probe), a moment before the server in it listens.
		u.until = time.Now().Add(h.o.ResumeTimeout)
	}
	return u
}

// upstreamRetry sends a request again while its connection fails before
// the sandbox got it: such a request never reached the sandbox, so sending
// it again is safe for any method.
type upstreamRetry struct {
	next    http.RoundTripper
	retries UpstreamRetries
	// until, when set (a just-resumed Sandbox), retries every refusedRetry
	// until then instead.
	until   time.Time
	onRetry func()
}

func (u *upstreamRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := u.next.RoundTrip(req)
		if err == nil || !notForwarded(err) {
			return resp, err
		}
		wait, again := u.retries.wait(i)
		if !u.until.IsZero() {
			wait, again = refusedRetry, time.Now().Add(refusedRetry).Before(u.until)
		}
		if !again {
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
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			return resp, err
		case <-t.C:
		}
		if u.onRetry != nil {
			u.onRetry()
		}
	}
}

// notForwarded reports a failure before the sandbox got the request: the
// connection was never made (a dial error other than a timeout: refused,
// an address not resolved, a port-forward stream not opened), or the Pod
// refused it (through a port-forward, the kubelet's message says so; kwok,
// on a local cluster, has no forward for the port until the Pod's
// PortForward object exists). A connection refused is only ever a failure
// to connect.
func notForwarded(err error) bool {
	if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" && !opErr.Timeout() {
		return true
	}
	msg := err.Error()
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "no forward found for port") || strings.Contains(msg, "forward not found for port")
}
