package lostanswer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentsandbox/reconciler/apply/ssa"
)

// injector sits between the controller and the API server. Armed for a
// namespace, it passes the first warm take there (an apply to a Sandbox
// naming a SandboxClaim as owner) to the API server, drops the answer,
// fails the next read of that Sandbox, and holds back every Sandbox watch
// event for a while: the controller learns nothing of its own write but
// by asking again. Armed for creates (armCreate), it does the same to the
// first create of a claim's own Sandbox there, after running a hook while
// the create waits.
type injector struct {
	mu        sync.Mutex
	ns        string // armed for this namespace; "" disarmed
	lost      string // the Sandbox whose take's (or create's) answer was lost
	readFails int    // reads of it still to fail
	reads     int    // reads of it made after the loss
	heldUntil time.Time
	hold      time.Duration // how long watch events are held after the loss
	// create arms the injector for the claim's create instead of a take;
	// before runs ahead of that create (nothing is held yet).
	create bool
	before func()
}

// errLost is what the controller sees instead of the answer.
var errLost = errors.New("read: connection reset by peer (injected: the answer was lost)")

func (f *injector) arm(ns string, readFails int, hold time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ns, f.readFails, f.heldUntil = ns, readFails, time.Time{}
	f.hold, f.create, f.before, f.lost, f.reads = hold, false, nil, "", 0
}

// armCreate arms the injector for the first create of a claim's own
// Sandbox in ns: before runs while that create waits, then the create is
// made, its answer dropped and the Sandbox watch held for hold.
func (f *injector) armCreate(ns string, hold time.Duration, before func()) {
	f.arm(ns, 0, hold)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.create, f.before = true, before
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
		collection := f.ns != "" && path == strings.TrimSuffix(prefix, "/")
		switch {
		case f.create && f.lost == "" && (collection && req.Method == http.MethodPost || ours && req.Method == http.MethodPatch && !strings.Contains(name, "/")):
			before := f.before
			f.mu.Unlock()
			return f.loseCreate(rt, req, before)
		case ours && req.Method == http.MethodPatch && f.lost == "" && !f.create:
			f.mu.Unlock()
			body, err := readBody(req)
			switch {
			case err != nil:
				return nil, err
			case !bytes.Contains(body, []byte(`"kind":"SandboxClaim"`)):
				return rt.RoundTrip(req)
			}
			return f.lose(rt, req, name)
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

// loseCreate makes a create of a claim's own Sandbox (a create request, or
// the engine's create by apply; any other write goes through) after running before, holds the watch from before the
// write, and loses the answer.
func (f *injector) loseCreate(rt http.RoundTripper, req *http.Request, before func()) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	var sb struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if !bytes.Contains(body, []byte(`"kind":"SandboxClaim"`)) || json.Unmarshal(body, &sb) != nil ||
		req.Method == http.MethodPatch && !bytes.Contains(body, []byte(`"resourceVersion":"`+ssa.CreateOnlyVersion+`"`)) {
		return rt.RoundTrip(req)
	}
	if before != nil {
		before()
	}
	return f.lose(rt, req, sb.Metadata.Name)
}

// lose makes req's write on the API server, holding the watch from before
// it (its event must not reach the cache ahead of the controller's next
// look), and loses the answer: the write to name is recorded as lost.
func (f *injector) lose(rt http.RoundTripper, req *http.Request, name string) (*http.Response, error) {
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
}

// readBody reads req's body and puts it back for the write.
func readBody(req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
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
