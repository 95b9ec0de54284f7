package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// fast keeps retries quick in tests.
var fast = WithRetries(6, time.Millisecond)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, opts ...Option) *Sandbox {
	t.Helper()
	sb, err := Dial(ctxFor(t), "team-a", "sb-1", append([]Option{fast}, opts...)...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func TestRunAndFiles(t *testing.T) {
	rt, srv := newFakeRuntime(t)
	sb := dial(t, WithBaseURL(srv.URL))
	ctx := ctxFor(t)

	res, err := sb.Run(ctx, "echo hi")
	if err != nil || res != (Result{Stdout: "hi\n"}) {
		t.Fatalf("Run(echo hi) = %+v, %v", res, err)
	}
	if res, err := sb.Run(ctx, "exit 3"); err != nil || res.ExitCode != 3 || res.Stderr != "exiting\n" {
		t.Fatalf("Run(exit 3) = %+v, %v", res, err)
	}

	if err := sb.Write(ctx, "notes.txt", strings.NewReader("hello, sandbox")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	// A reader of unknown length is streamed (chunked).
	if err := sb.Write(ctx, "slow.txt", iotest.OneByteReader(strings.NewReader("abc"))); err != nil {
		t.Fatalf("Write (streamed): %v", err)
	}
	rc, err := sb.Read(ctx, "notes.txt")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "hello, sandbox" {
		t.Fatalf("Read = %q", b)
	}
	entries, err := sb.List(ctx, "")
	if err != nil || len(entries) != 2 || entries[0].Name != "notes.txt" || entries[0].Size != 14 ||
		entries[0].Type != FileTypeFile || !entries[0].ModTime.Equal(time.Unix(1700000000, 5e8)) {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	for p, want := range map[string]bool{"notes.txt": true, "/app/notes.txt": true, "gone.txt": false} {
		if got, err := sb.Exists(ctx, p); err != nil || got != want {
			t.Errorf("Exists(%q) = %v, %v; want %v", p, got, err, want)
		}
	}

	// Upload shape: multipart with a known length where it is known.
	var uploads []recorded
	for _, r := range rt.recorded() {
		if r.rawPath == "/upload" {
			uploads = append(uploads, r)
		}
	}
	if len(uploads) != 2 || uploads[0].contentLength <= 14 || uploads[1].contentLength != -1 ||
		!strings.HasPrefix(uploads[0].header.Get("Content-Type"), "multipart/form-data; boundary=") {
		t.Errorf("uploads = %+v", uploads)
	}
}

func TestPathsAndErrors(t *testing.T) {
	rt, srv := newFakeRuntime(t)
	sb := dial(t, WithBaseURL(srv.URL))
	ctx := ctxFor(t)

	_, err := sb.Read(ctx, "sub dir/missing.txt")
	var herr *HTTPError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &herr) || herr.StatusCode != http.StatusNotFound || herr.Detail != "File not found" || herr.RequestID == "" {
		t.Fatalf("Read(missing) = %v; want ErrNotFound with the detail", err)
	}
	if got := rt.recorded()[len(rt.recorded())-1].rawPath; got != "/download/sub%20dir%2Fmissing.txt" {
		t.Errorf("path sent = %s; want every reserved byte, / included, percent-encoded", got)
	}
	_, err = sb.Read(ctx, "../../etc/passwd")
	if !errors.Is(err, ErrAccessDenied) || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("Read(escape) = %v; want ErrAccessDenied", err)
	}
	if _, err := sb.List(ctx, ".."); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("List(..) = %v", err)
	}
	if got := rt.recorded()[len(rt.recorded())-1].rawPath; got != "/list/%2E%2E" {
		t.Errorf("path sent = %s", got)
	}

	n := len(rt.recorded())
	for _, name := range []string{"", ".", "..", "/etc/passwd", "a/../../b", "dir/"} {
		if err := sb.Write(ctx, name, strings.NewReader("x")); err == nil {
			t.Errorf("Write(%q) accepted; want a path relative to the base directory", name)
		}
	}
	if len(rt.recorded()) != n {
		t.Errorf("invalid writes reached the runtime")
	}

	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(ctx, "echo hi"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v; want ErrClosed", err)
	}
}

func TestRouterHeaders(t *testing.T) {
	_, runtimeSrv := newFakeRuntime(t)
	_, plain := newFakeRuntime(t)
	router, srv := newFakeRouter(t, runtimeSrv.Config.Handler)
	sb := dial(t, WithRouter(srv.URL+"/"), WithBearerToken("s3cret"), WithPort(9000))
	ctx := ctxFor(t)
	if res, err := sb.Run(ctx, "echo routed"); err != nil || res.Stdout != "routed\n" {
		t.Fatalf("Run via router = %+v, %v", res, err)
	}
	if _, err := sb.Exists(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	seen := router.seen()
	if len(seen) != 3 { // health, run, exists
		t.Fatalf("router saw %d requests, want 3", len(seen))
	}
	ids := map[string]bool{}
	for i, h := range seen {
		if h.Get(HeaderSandboxID) != "sb-1" || h.Get(HeaderSandboxNamespace) != "team-a" || h.Get(HeaderSandboxPort) != "9000" {
			t.Errorf("request %d: routing headers %v", i, h)
		}
		ids[h.Get(HeaderRequestID)] = true
	}
	if len(ids) != 3 || ids[""] {
		t.Errorf("X-Request-ID not one per call: %v", ids)
	}
	if seen[1].Get(HeaderSandboxTimeout) == "" || seen[2].Get(HeaderSandboxTimeout) != "" {
		t.Errorf("X-Sandbox-Timeout should follow the context's deadline: %q, %q", seen[1].Get(HeaderSandboxTimeout), seen[2].Get(HeaderSandboxTimeout))
	}

	// The router's own errors come back typed, with its detail.
	_, err := Dial(ctx, "team-a", "sb-1", fast, WithRouter(srv.URL), WithBearerToken("wrong"))
	var herr *HTTPError
	if !errors.Is(err, ErrAccessDenied) || !errors.As(err, &herr) || herr.Detail != "unauthenticated" {
		t.Fatalf("Dial with a bad token = %v", err)
	}
	// Direct URLs carry no routing headers.
	sb2 := dial(t, WithBaseURL(plain.URL))
	if _, err := sb2.Run(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
}

func TestRetries(t *testing.T) {
	rt, srv := newFakeRuntime(t)
	sb := dial(t, WithBaseURL(srv.URL))
	ctx := ctxFor(t)
	count := func(p string) int {
		n := 0
		for _, r := range rt.recorded() {
			if r.rawPath == p {
				n++
			}
		}
		return n
	}
	failing := func(status, times int) func(*http.Request) (int, bool) {
		left := times
		return func(r *http.Request) (int, bool) {
			if r.URL.Path == "/" || left == 0 {
				return 0, false
			}
			left--
			return status, true
		}
	}

	rt.setFail(failing(502, 1))
	_, err := sb.Run(ctx, "echo once")
	var herr *HTTPError
	if !errors.As(err, &herr) || herr.StatusCode != http.StatusBadGateway || count("/execute") != 1 {
		t.Fatalf("Run on 502 = %v after %d requests; want the 502, sent once", err, count("/execute"))
	}
	rt.setFail(failing(503, 1))
	if err := sb.Write(ctx, "a.txt", strings.NewReader("a")); err == nil || count("/upload") != 1 {
		t.Fatalf("Write on 503 = %v after %d requests; want an error, sent once", err, count("/upload"))
	}

	rt.setFail(failing(502, 2))
	if _, err := sb.List(ctx, "."); err != nil || count("/list/%2E") != 3 {
		t.Fatalf("List after two 502s = %v after %d requests; want success on the third", err, count("/list/%2E"))
	}
	rt.setFail(failing(500, 100))
	_, err = sb.Exists(ctx, "a.txt")
	if !errors.Is(err, ErrRetriesExhausted) || !errors.As(err, &herr) || herr.StatusCode != http.StatusInternalServerError || count("/exists/a.txt") != 6 {
		t.Fatalf("Exists on 500s = %v after %d requests; want 6 attempts", err, count("/exists/a.txt"))
	}
	rt.setFail(failing(404, 100))
	if _, err := sb.Read(ctx, "b.txt"); !errors.Is(err, ErrNotFound) || count("/download/b.txt") != 1 {
		t.Fatalf("Read on 404 = %v after %d requests; want no retry", err, count("/download/b.txt"))
	}
	rt.setFail(nil)

	// Connection errors: retried for reads, never for Run.
	drops := 2
	flaky := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path != "/" && drops > 0 {
			drops--
			return nil, errors.New("connection reset by peer")
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	sb2 := dial(t, WithBaseURL(srv.URL), WithHTTPClient(flaky))
	if ok, err := sb2.Exists(ctx, "a.txt"); err != nil || ok {
		t.Fatalf("Exists over a flaky connection = %v, %v", ok, err)
	}
	drops = 1
	if _, err := sb2.Run(ctx, "echo hi"); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("Run over a dropped connection = %v; want the error, no retry", err)
	}

	// The context bounds everything: a deadline is ErrTimeout.
	rt.setFail(failing(503, 1000))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	slow := dial(t, WithBaseURL(srv.URL), WithRetries(6, time.Second))
	if _, err := slow.List(short, "."); !errors.Is(err, ErrTimeout) {
		t.Fatalf("List past the deadline = %v; want ErrTimeout", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRunOutputTooLarge(t *testing.T) {
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			return
		}
		_, _ = io.WriteString(w, `{"stdout": "`+strings.Repeat("a", MaxResultSize)+`", "stderr": "", "exit_code": 0}`)
	})
	_, ts := newFakeRuntime(t)
	ts.Config.Handler = srv
	sb := dial(t, WithBaseURL(ts.URL))
	if _, err := sb.Run(ctxFor(t), "yes"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Run with 16 MiB of output = %v; want ErrTooLarge", err)
	}
}

func TestBaseURLTemplate(t *testing.T) {
	s := &Sandbox{namespace: "ns", name: "sb", podName: "sb-pod", podIPs: []string{"fd00::1", "10.0.0.7"}}
	if got := s.expand("http://{podIP}:8888/{namespace}/{name}/{pod}"); got != "http://10.0.0.7:8888/ns/sb/sb-pod" {
		t.Errorf("expand = %s", got)
	}
	s.podIPs = []string{"fd00::1"}
	if got := s.expand("http://{podIP}:8888"); got != "http://[fd00::1]:8888" {
		t.Errorf("expand = %s", got)
	}
	if _, err := Dial(context.Background(), "ns", "sb"); err == nil {
		t.Error("Dial without a router or base URL should fail: port-forward needs a Client")
	}
}
