package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// fakeSandbox plays team/box, opted in to resume on connect, as both the
// resolver and the resume writer: Suspended until SetRunning, then
// starting for startup, then routable at 127.0.0.1.
type fakeSandbox struct {
	startup  time.Duration
	never    bool  // never routable once Running
	writeErr error // SetRunning fails with it
	idle     time.Duration

	mu      sync.Mutex
	running time.Time
	writes  atomic.Int64
}

var fakeKey = resume.Key{Namespace: "team", Name: "box", UID: "uid-box"}

func (f *fakeSandbox) SetRunning(_ context.Context, k resume.Key) error {
	f.writes.Add(1)
	if k != fakeKey {
		return errors.New("wrong key " + k.String())
	}
	if f.writeErr != nil {
		return f.writeErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running.IsZero() {
		f.running = time.Now()
	}
	return nil
}

func (f *fakeSandbox) Resolve(_ context.Context, t Target) (Endpoint, error) {
	f.mu.Lock()
	running := f.running
	f.mu.Unlock()
	switch {
	case running.IsZero():
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonSuspended, Detail: "Sandbox team/box is suspended.",
			Resume: &Resumable{Key: fakeKey, Suspended: true}}
	case f.never || time.Since(running) < f.startup:
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Retry: true, Detail: "Sandbox team/box is not ready: it has no pod.",
			Resume: &Resumable{Key: fakeKey}}
	}
	return Endpoint{Namespace: "team", Sandbox: "box", Pod: "box", PodUID: "pod-box", IP: netip.MustParseAddr("127.0.0.1"), Port: t.Port,
		Source: SourceCache, SandboxUID: fakeKey.UID, IdleTimeout: f.idle}, nil
}

func okBackend(t *testing.T) string {
	return backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
}

// TestResumeOnConnect: concurrent requests for a Suspended Sandbox that
// opted in make one write, all wait for it and all are served once it is
// routable; one event and one resume are recorded.
func TestResumeOnConnect(t *testing.T) {
	port := okBackend(t)
	sb := &fakeSandbox{startup: 300 * time.Millisecond}
	rec := events.NewFakeRecorder(10)
	r := newTestRouter(t, func(o *Options) { o.Resolver, o.Resume, o.Events = sb, sb, rec })
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port}, nil)
			if resp.StatusCode != http.StatusOK || body != "ok" {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	if w := sb.writes.Load(); w != 1 {
		t.Errorf("%d SetRunning writes, want 1", w)
	}
	if got := testutil.ToFloat64(r.metrics.resumes.WithLabelValues(resumeResumed)); got != 1 {
		t.Errorf("resumes counted: %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.metrics.resumeWaits); got != n {
		t.Errorf("requests that waited counted: %v, want %d", got, n)
	}
	if got := testutil.CollectAndCount(r.metrics.resumeDuration); got != 1 {
		t.Errorf("resume latency series: %d", got)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Normal "+EventResumedOnConnect+" Resumed by a request through the sandbox router; Ready ") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
	select {
	case e := <-rec.Events:
		t.Errorf("a second event: %q", e)
	default:
	}
	// Routable now: no more writes, no more waits.
	if resp, _ := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port}, nil); resp.StatusCode != http.StatusOK || sb.writes.Load() != 1 {
		t.Errorf("after the resume: %d, %d writes", resp.StatusCode, sb.writes.Load())
	}
}

// TestResumeFailures: a resume that never becomes routable answers 504
// after --resume-timeout, a request whose own timeout is shorter 504 after
// it, a refused write 502; a starting Sandbox is waited for beyond
// --resolve-wait; without a writer a Suspended Sandbox is refused 409.
func TestResumeFailures(t *testing.T) {
	port := okBackend(t)
	headers := map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port}
	detail := func(body, want string) bool { return strings.Contains(body, want) }

	never := &fakeSandbox{never: true}
	r := newTestRouter(t, func(o *Options) { o.Resolver, o.Resume, o.ResumeTimeout = never, never, 300*time.Millisecond })
	start := time.Now()
	resp, body := do(t, r, http.MethodGet, "/", headers, nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !detail(body, "was resumed but did not become ready within 300ms") || time.Since(start) > 5*time.Second {
		t.Errorf("never ready: %d %s after %s", resp.StatusCode, body, time.Since(start))
	}
	if testutil.ToFloat64(r.metrics.resumes.WithLabelValues(resumeTimeout)) != 1 {
		t.Error("the timed-out resume was not counted")
	}
	// Running now, never ready: a request waits the resume timeout, no more.
	resp, body = do(t, r, http.MethodGet, "/", headers, nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !detail(body, "Timed out waiting for sandbox team/box to become ready") || never.writes.Load() != 1 {
		t.Errorf("starting, never ready: %d %s, %d writes", resp.StatusCode, body, never.writes.Load())
	}

	slow := &fakeSandbox{startup: time.Hour}
	r = newTestRouter(t, func(o *Options) { o.Resolver, o.Resume = slow, slow })
	h := map[string]string{"X-Sandbox-Timeout": "0.3"}
	for k, v := range headers {
		h[k] = v
	}
	start = time.Now()
	resp, body = do(t, r, http.MethodGet, "/", h, nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !detail(body, "Timed out waiting for sandbox team/box to resume") || time.Since(start) > 5*time.Second {
		t.Errorf("X-Sandbox-Timeout shorter than the resume: %d %s after %s", resp.StatusCode, body, time.Since(start))
	}

	forbidden := &fakeSandbox{writeErr: apierrors.NewForbidden(schema.GroupResource{Group: sandboxv1beta1.GroupName, Resource: "sandboxes"}, "box", errors.New("no"))}
	r = newTestRouter(t, func(o *Options) { o.Resolver, o.Resume = forbidden, forbidden })
	resp, body = do(t, r, http.MethodGet, "/", headers, nil)
	if resp.StatusCode != http.StatusBadGateway || !detail(body, "may not patch sandboxes") {
		t.Errorf("a refused write: %d %s", resp.StatusCode, body)
	}
	if testutil.ToFloat64(r.metrics.resumes.WithLabelValues(resumeError)) != 1 {
		t.Error("the failed resume was not counted")
	}

	// Resumed by someone else, starting for longer than --resolve-wait.
	starting := &fakeSandbox{startup: 500 * time.Millisecond}
	_ = starting.SetRunning(context.Background(), fakeKey)
	starting.writes.Store(0)
	r = newTestRouter(t, func(o *Options) { o.Resolver, o.Resume, o.ResolveWait = starting, starting, 50*time.Millisecond })
	if resp, body := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusOK || starting.writes.Load() != 0 {
		t.Errorf("starting: %d %s, %d writes", resp.StatusCode, body, starting.writes.Load())
	}

	off := &fakeSandbox{}
	r = newTestRouter(t, func(o *Options) { o.Resolver = off })
	if resp, body := do(t, r, http.MethodGet, "/", headers, nil); resp.StatusCode != http.StatusConflict || !detail(body, "does not resume sandboxes") {
		t.Errorf("no writer: %d %s", resp.StatusCode, body)
	}
}

// TestNotOptedIn goes through the cache resolver: a Suspended Sandbox that
// did not opt in is refused 409 with how to opt in, and never written.
func TestNotOptedIn(t *testing.T) {
	sb := testSandbox("box", "")
	sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	writer := &fakeSandbox{}
	r := newTestRouter(t, func(o *Options) { o.Resolver, o.Resume = &CacheResolver{Reader: testReader(t, sb)}, writer })
	resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team"}, nil)
	hint := strings.ReplaceAll(sandboxv1beta1.OptInHint, `"`, `\"`)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, hint) || writer.writes.Load() != 0 {
		t.Errorf("%d %s, %d writes", resp.StatusCode, body, writer.writes.Load())
	}
	if testutil.ToFloat64(r.metrics.resolutionFailures.WithLabelValues(ReasonSuspended)) != 1 {
		t.Error("the refusal was not counted as suspended")
	}
}

// TestActivity: a request to a Sandbox with idle suspend is activity from
// its start to its end (Reporter.Begin and end); one without is not.
func TestActivity(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "ok")
	}))
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	var writes []time.Time
	reporter := NewActivityReporter(func(_ context.Context, k resume.Key, at time.Time) error {
		if k != fakeKey {
			t.Errorf("activity of %v", k)
		}
		writes = append(writes, at)
		return nil
	}, nil, testr.New(t))
	reporter.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	sb := &fakeSandbox{idle: 10 * time.Minute}
	_ = sb.SetRunning(context.Background(), fakeKey)
	r := newTestRouter(t, func(o *Options) { o.Resolver, o.Activity, o.ActivityInterval = sb, reporter, time.Minute })

	done := make(chan int, 1)
	go func() {
		resp, _ := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": port}, nil)
		done <- resp.StatusCode
	}()
	<-entered
	ctx := context.Background()
	if n := reporter.Flush(ctx); n != 1 {
		t.Fatalf("first traffic: %d writes, want 1 at once", n)
	}
	advance(time.Minute) // the interval: min(idle/2, --activity-interval)
	if n := reporter.Flush(ctx); n != 1 {
		t.Errorf("a request in flight for an interval: %d writes, want 1", n)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	// end() runs as the handler returns (before it counts the request), a
	// moment after the client has its response.
	countedRequests(r, "2xx", 1)
	advance(time.Minute)
	if n := reporter.Flush(ctx); n != 1 {
		t.Errorf("the interval the request ended in: %d writes, want 1", n)
	}
	advance(time.Minute)
	if n := reporter.Flush(ctx); n != 0 {
		t.Errorf("after the request ended and an interval passed: %d writes, want none", n)
	}

	plain := &fakeSandbox{}
	_ = plain.SetRunning(context.Background(), fakeKey)
	reporter = NewActivityReporter(func(context.Context, resume.Key, time.Time) error { return nil }, nil, testr.New(t))
	r = newTestRouter(t, func(o *Options) { o.Resolver, o.Activity = plain, reporter })
	if resp, _ := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": okBackend(t)}, nil); resp.StatusCode != http.StatusOK {
		t.Fatal(resp.StatusCode)
	}
	if reporter.Pending() != 0 {
		t.Error("a request to a Sandbox without idle suspend was reported")
	}
}
