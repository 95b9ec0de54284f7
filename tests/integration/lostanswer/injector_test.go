package lostanswer

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// injector sits between the controller and the API server. Armed for a
// namespace, it passes the first warm take there (an apply to a Sandbox
// naming a SandboxClaim as owner) to the API server, drops the answer,
// fails the next read of that Sandbox, and holds back every Sandbox watch
// event for a while: the controller learns nothing of its own write but
// by asking again.
type injector struct {
	mu        sync.Mutex
	ns        string // armed for this namespace; "" disarmed
	lost      string // the Sandbox whose take's answer was lost
	readFails int    // reads of it still to fail
	reads     int    // reads of it made after the loss
	heldUntil time.Time
	hold      time.Duration // how long watch events are held after the loss
}

// errLost is what the controller sees instead of the answer.
var errLost = errors.New("read: connection reset by peer (injected: the answer was lost)")

func (f *injector) arm(ns string, readFails int, hold time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ns, f.readFails, f.heldUntil = ns, readFails, time.Time{}
	f.hold = hold
}

func (f *injector) result() (lost string, reads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost, f.reads
}

func (f *injector) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		path := req.URL.Path
		isSandboxes := strings.HasPrefix(path, "/apis/agents.x-k8s.io/") && strings.Contains(path, "/sandboxes")
		if !isSandboxes {
			return rt.RoundTrip(req)
		}
		if req.URL.Query().Get("watch") == "true" {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body = &heldBody{ReadCloser: resp.Body, f: f}
			}
			return resp, err
		}
		f.mu.Lock()
		prefix := "/apis/agents.x-k8s.io/v1beta1/namespaces/" + f.ns + "/sandboxes/"
		ours := f.ns != "" && strings.HasPrefix(path, prefix)
		name := strings.TrimPrefix(path, prefix)
		switch {
		case ours && req.Method == http.MethodPatch && f.lost == "":
			f.mu.Unlock()
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			if !bytes.Contains(body, []byte(`"kind":"SandboxClaim"`)) {
				return rt.RoundTrip(req)
			}
			// Held from before the write: its watch event must not
			// reach the cache ahead of the controller's next look.
			f.mu.Lock()
			f.heldUntil = time.Now().Add(f.hold)
			f.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			_ = resp.Body.Close()
			f.mu.Lock()
			f.lost = name
			f.mu.Unlock()
			return nil, errLost
		case ours && req.Method == http.MethodGet && name == f.lost:
			f.reads++
			if f.readFails > 0 {
				f.readFails--
				f.mu.Unlock()
				return nil, errLost
			}
		}
		f.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// heldBody delays a watch stream's bytes while the injector holds events
// back, as a lagging cache would.
type heldBody struct {
	io.ReadCloser
	f *injector
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.f.mu.Lock()
	until := b.f.heldUntil
	b.f.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
	return n, err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
