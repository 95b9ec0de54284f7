package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// fakeRuntime speaks upstream's legacy runtime protocol (DATAPLANE.md) over
// an in-memory directory: GET /, POST /execute, POST /upload, GET
// /download/{path}, /list/{path}, /exists/{path}. Paths are relative to
// the base directory "/app"; anything resolving outside it is 403
// {"message": "Access denied"}, as upstream answers.
type fakeRuntime struct {
	mu       sync.Mutex
	files    map[string]string
	requests []recorded
	// fail, when set, answers a request instead (for retry tests).
	fail func(r *http.Request) (status int, ok bool)
}

type recorded struct {
	method, rawPath string
	header          http.Header
	contentLength   int64
}

func newFakeRuntime(t *testing.T) (*fakeRuntime, *httptest.Server) {
	f := &fakeRuntime{files: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeRuntime) setFail(fail func(r *http.Request) (int, bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *fakeRuntime) recorded() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// resolve confines p to the base directory like upstream's realpath check.
func resolve(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		p = "/app/" + p
	}
	p = path.Clean(p)
	if p == "/app" {
		return ".", true
	}
	rel, ok := strings.CutPrefix(p, "/app/")
	return rel, ok
}

func (f *fakeRuntime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, recorded{r.Method, r.URL.EscapedPath(), r.Header.Clone(), r.ContentLength})
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if status, ok := fail(r); ok {
			writeJSON(w, status, map[string]string{"detail": "injected " + strconv.Itoa(status)})
			return
		}
	}
	op, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		writeJSON(w, 200, map[string]string{"status": "ok"})
	case r.Method == http.MethodPost && op == "execute":
		var in struct{ Command string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			writeJSON(w, 422, map[string]string{"detail": err.Error()})
			return
		}
		writeJSON(w, 200, f.run(in.Command))
	case r.Method == http.MethodPost && op == "upload":
		file, hdr, err := r.FormFile("file")
		if err != nil {
			writeJSON(w, 400, map[string]string{"detail": err.Error()})
			return
		}
		b, _ := io.ReadAll(file)
		f.mu.Lock()
		f.files[hdr.Filename] = string(b)
		f.mu.Unlock()
		writeJSON(w, 200, map[string]string{"message": "File '" + hdr.Filename + "' uploaded successfully."})
	case r.Method == http.MethodGet && (op == "download" || op == "list" || op == "exists"):
		rel, ok := resolve(rest)
		if !ok {
			writeJSON(w, 403, map[string]string{"message": "Access denied"})
			return
		}
		f.serveFile(w, op, rest, rel)
	default:
		writeJSON(w, 404, map[string]string{"detail": "Not Found"})
	}
}

func (f *fakeRuntime) run(command string) Result {
	args := strings.Fields(command)
	switch {
	case len(args) > 0 && args[0] == "echo":
		return Result{Stdout: strings.Join(args[1:], " ") + "\n"}
	case len(args) == 2 && args[0] == "exit":
		code, _ := strconv.Atoi(args[1])
		return Result{Stderr: "exiting\n", ExitCode: code}
	}
	return Result{Stderr: "command not found\n", ExitCode: 1}
}

func (f *fakeRuntime) serveFile(w http.ResponseWriter, op, asked, rel string) {
	f.mu.Lock()
	content, isFile := f.files[rel]
	var names []string
	for n := range f.files {
		names = append(names, n)
	}
	f.mu.Unlock()
	sort.Strings(names)
	isDir := rel == "."
	switch op {
	case "exists":
		writeJSON(w, 200, map[string]any{"path": asked, "exists": isFile || isDir})
	case "download":
		if !isFile {
			writeJSON(w, 404, map[string]string{"detail": "File not found"})
			return
		}
		_, _ = io.WriteString(w, content)
	case "list":
		if !isDir {
			writeJSON(w, 404, map[string]string{"detail": "Directory not found"})
			return
		}
		out := []map[string]any{}
		for _, n := range names {
			out = append(out, map[string]any{"name": n, "size": len(f.files[n]), "type": "file", "mod_time": 1700000000.5})
		}
		writeJSON(w, 200, out)
	}
}

// fakeRouter checks upstream's routing headers on every request and passes
// it to the runtime; it answers /healthz itself. With checks set (before
// the first request), it is one of ours: /healthz says it checks claim
// UIDs, a request naming another claim than claimUID gets 404, and its
// answers carry sandboxUID. With routed set too, it routes a request
// naming only claimUID (no X-Sandbox-ID) to the Sandbox routed, whose
// name its answers carry; without, it refuses such a request 404 as if
// the claim had not taken a Sandbox within its wait.
type fakeRouter struct {
	mu                   sync.Mutex
	headers              []http.Header
	probes               int
	checks               bool
	claimUID, sandboxUID types.UID
	routed               string
	// hold keeps a request naming only a claim until its client leaves.
	hold bool
	// resolves answers a request that asks only to be routed
	// (HeaderResolveOnly) itself, 204, as our router does.
	resolves bool
}

func newFakeRouter(t *testing.T, runtime http.Handler) (*fakeRouter, *httptest.Server) {
	rt := &fakeRouter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt.mu.Lock()
		checks, routed, hold, resolves := rt.checks, rt.routed, rt.hold, rt.resolves
		if r.URL.Path == "/healthz" {
			rt.probes++
			rt.mu.Unlock()
			if checks {
				w.Header().Set(HeaderRouterChecks, "claim-uid, claim-route")
			}
			writeJSON(w, 200, map[string]string{"status": "ok"})
			return
		}
		rt.headers = append(rt.headers, r.Header.Clone())
		rt.mu.Unlock()
		if checks {
			if c := r.Header.Get(HeaderSandboxClaimUID); c != "" && c != string(rt.claimUID) {
				w.Header().Set(HeaderNotForwarded, "true")
				writeJSON(w, 404, map[string]string{"detail": "Sandbox is not the sandbox of claim UID " + c + "."})
				return
			}
			w.Header().Set(HeaderSandboxUID, string(rt.sandboxUID))
			if r.Header.Get(HeaderSandboxID) == "" && r.Header.Get(HeaderSandboxClaimUID) != "" {
				if hold {
					<-r.Context().Done()
					return
				}
				if routed == "" {
					w.Header().Set(HeaderNotForwarded, "true")
					writeJSON(w, 404, map[string]string{"detail": "No Sandbox of claim UID " + r.Header.Get(HeaderSandboxClaimUID) + "."})
					return
				}
				r.Header.Set(HeaderSandboxID, routed)
			}
			if routed != "" {
				w.Header().Set(HeaderSandboxID, routed)
			}
		}
		if r.Header.Get(HeaderSandboxID) == "" {
			writeJSON(w, 400, map[string]string{"detail": "missing X-Sandbox-ID header"})
			return
		}
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			writeJSON(w, 401, map[string]string{"detail": "unauthenticated"})
			return
		}
		if checks && resolves && r.Header.Get(HeaderResolveOnly) == "true" {
			w.Header().Set(HeaderNotForwarded, "true")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.Header.Del("Authorization") // a router strips it before the pod
		runtime.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return rt, srv
}

func (r *fakeRouter) seen() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}
