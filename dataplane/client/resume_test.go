package client

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

var optedIn = map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}

// checkResumePatch checks that p is the SDK's resume: a server-side apply
// of spec.operatingMode=Running alone, forced, under its field manager,
// with the Sandbox's UID as a precondition.
func checkResumePatch(t *testing.T, f *fakeCluster, p applyPatch) {
	t.Helper()
	if p.contentType != "application/apply-patch+yaml" {
		t.Errorf("resume PATCH content type %q; want application/apply-patch+yaml", p.contentType)
	}
	if p.fieldManager != sandboxv1beta1.FieldManagerOperatingMode || p.force != "true" {
		t.Errorf("resume PATCH fieldManager=%q force=%q; want %s, true", p.fieldManager, p.force, sandboxv1beta1.FieldManagerOperatingMode)
	}
	if spec := p.spec(); len(spec) != 1 || spec["operatingMode"] != "Running" {
		t.Errorf("resume PATCH spec %v; want operatingMode Running and nothing else", spec)
	}
	m := p.meta()
	if m["uid"] != string(f.uid) || m["name"] != f.name || m["namespace"] != "team-a" {
		t.Errorf("resume PATCH metadata %v; want the Sandbox's name, namespace and uid %s", m, f.uid)
	}
	if _, ok := m["annotations"]; ok {
		t.Errorf("resume PATCH sets annotations: %v", m)
	}
	if p.body["apiVersion"] != "agents.x-k8s.io/v1beta1" || p.body["kind"] != "Sandbox" {
		t.Errorf("resume PATCH apiVersion/kind %v/%v", p.body["apiVersion"], p.body["kind"])
	}
}

// A call whose port-forward finds the Pod gone resumes an opted-in
// Suspended Sandbox (one apply), waits for it to be Ready, and is sent
// again: the runtime runs the command once.
func TestResumeOnConnectRun(t *testing.T) {
	f := newFakeCluster(t, "sb-resume", optedIn, false)
	sb := f.open(t)
	ctx := ctxFor(t)
	f.suspend(t)
	watchesBefore := len(f.sandboxWatches())

	res, err := sb.Run(ctx, "echo resumed")
	if err != nil || res.Stdout != "resumed\n" {
		t.Fatalf("Run on a suspended sandbox = %+v, %v; want it resumed and run", res, err)
	}
	if n := f.refusedPortForwards(); n == 0 {
		t.Errorf("the Run never found the Pod gone: the test proves nothing")
	}
	patches := f.recordedPatches()
	if len(patches) != 1 {
		t.Fatalf("%d PATCHes; want one resume: %+v", len(patches), patches)
	}
	checkResumePatch(t, f, patches[0])
	watches := f.sandboxWatches()[watchesBefore:]
	if len(watches) == 0 {
		t.Errorf("no watch of the Sandbox after the resume: it did not wait for Ready")
	}
	for _, q := range watches {
		if q.Get("fieldSelector") != "metadata.name="+f.name || q.Get("resourceVersion") == "" {
			t.Errorf("sandbox watch %v; want one by name from a resourceVersion", q)
		}
	}
	if n := f.executes(); n != 1 {
		t.Errorf("the runtime ran %d commands; want the one Run, once", n)
	}
	// The port-forward followed the Pod by its watch alone: it read the
	// events (a Pod it cannot decode would send it back to GET and list).
	if lists := f.podLists(); lists != 0 {
		t.Errorf("the port-forward listed Pods %d times; want its watch's events read", lists)
	}

	// Resumed: the next calls go straight through.
	if res, err := sb.Run(ctx, "echo again"); err != nil || res.Stdout != "again\n" {
		t.Fatalf("Run after the resume = %+v, %v", res, err)
	}
	if ok, err := sb.Exists(ctx, "."); err != nil || !ok {
		t.Fatalf("Exists after the resume = %v, %v", ok, err)
	}
	if n := len(f.recordedPatches()); n != 1 {
		t.Errorf("%d PATCHes after more calls; want still one", n)
	}
}

// Open resumes an opted-in Suspended Sandbox too.
func TestResumeOnConnectOpen(t *testing.T) {
	f := newFakeCluster(t, "sb-open-suspended", optedIn, true)
	sb := f.open(t)
	patches := f.recordedPatches()
	if len(patches) != 1 {
		t.Fatalf("%d PATCHes; want one resume", len(patches))
	}
	checkResumePatch(t, f, patches[0])
	if res, err := sb.Run(ctxFor(t), "echo opened"); err != nil || res.Stdout != "opened\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// Concurrent calls to the same suspended Sandbox share one resume.
func TestResumeOnConnectConcurrent(t *testing.T) {
	f := newFakeCluster(t, "sb-concurrent", optedIn, false)
	sb := f.open(t)
	ctx := ctxFor(t)
	f.suspend(t)

	const n = 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := sb.Run(ctx, "echo concurrent")
			if err == nil && res.Stdout != "concurrent\n" {
				err = errors.New("wrong output " + res.Stdout)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Run %d: %v", i, err)
		}
	}
	patches := f.recordedPatches()
	if len(patches) != 1 {
		t.Fatalf("%d PATCHes for %d concurrent calls; want one resume", len(patches), n)
	}
	checkResumePatch(t, f, patches[0])
	if got := f.executes(); got != n {
		t.Errorf("the runtime ran %d commands; want %d", got, n)
	}
}

// A call that finds the Pod gone while another Open of the same Sandbox is
// resuming it waits for the Sandbox to be Ready before it is sent again,
// and both share the one resume.
func TestResumeOnConnectSharedWithOpen(t *testing.T) {
	f := newFakeCluster(t, "sb-shared", optedIn, false)
	sb := f.open(t)
	ctx := ctxFor(t)
	f.suspend(t)

	release := f.holdPatches()
	defer release()
	other := f.client(t)
	opened := make(chan error, 1)
	go func() {
		s2, err := other.Open(ctx, "team-a", f.name)
		if err == nil {
			_ = s2.Close(ctx)
		}
		opened <- err
	}()
	eventually(t, "Open's resume", func() bool { return len(f.recordedPatches()) == 1 })
	gets := f.sandboxGets()
	ran := make(chan error, 1)
	go func() {
		res, err := sb.Run(ctx, "echo shared")
		if err == nil && res.Stdout != "shared\n" {
			err = errors.New("wrong output " + res.Stdout)
		}
		ran <- err
	}()
	// The Run read the Sandbox (Suspended): let it join the resume.
	eventually(t, "the Run to read the Sandbox", func() bool { return f.sandboxGets() > gets })
	time.Sleep(50 * time.Millisecond)
	release()
	if err := <-ran; err != nil {
		t.Errorf("Run during Open's resume: %v", err)
	}
	if err := <-opened; err != nil {
		t.Errorf("Open: %v", err)
	}
	if n := len(f.recordedPatches()); n != 1 {
		t.Errorf("%d PATCHes; want one resume for both", n)
	}
	if n := f.executes(); n != 1 {
		t.Errorf("the runtime ran %d commands; want 1", n)
	}
}

// A Sandbox that did not opt in is not resumed: the call fails fast with
// ErrSuspended and says how to opt in; Open fails the same way.
func TestSuspendedNotOptedIn(t *testing.T) {
	f := newFakeCluster(t, "sb-no-opt-in", nil, false)
	sb := f.open(t)
	ctx := ctxFor(t)
	f.suspend(t)
	watches := len(f.sandboxWatches())

	_, err := sb.Run(ctx, "echo no")
	if !errors.Is(err, ErrSuspended) {
		t.Fatalf("Run on a suspended sandbox that did not opt in = %v; want ErrSuspended", err)
	}
	if !strings.Contains(err.Error(), sandboxv1beta1.AnnotationResumeOnConnect) {
		t.Errorf("error %q does not say how to opt in (%s)", err, sandboxv1beta1.AnnotationResumeOnConnect)
	}
	if p := f.recordedPatches(); len(p) != 0 {
		t.Errorf("%d PATCHes to a sandbox that did not opt in: %+v", len(p), p)
	}
	if n := len(f.sandboxWatches()); n != watches {
		t.Errorf("the Run watched the Sandbox; it should fail fast")
	}
	if n := f.executes(); n != 0 {
		t.Errorf("the runtime ran %d commands", n)
	}

	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{
		{"sb-closed", nil},
		{"sb-opted-out", map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "false"}},
		{"sb-idle-off", map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, tc.name, tc.annotations, true)
			start := time.Now()
			_, err := f.client(t).Open(ctxFor(t), "team-a", f.name)
			if !errors.Is(err, ErrSuspended) || !strings.Contains(err.Error(), "resume-on-connect") {
				t.Fatalf("Open of a suspended sandbox that did not opt in = %v; want ErrSuspended with the opt-in hint", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Open took %v to fail", d)
			}
			if len(f.recordedPatches()) != 0 || len(f.sandboxWatches()) != 0 {
				t.Errorf("Open patched or watched a sandbox that did not opt in: %d PATCHes, %d watches",
					len(f.recordedPatches()), len(f.sandboxWatches()))
			}
		})
	}
}

// A router's 409 for a suspended Sandbox is ErrSuspended; its other 409s
// are not.
func TestHTTPErrorSuspended(t *testing.T) {
	for _, tc := range []struct {
		err  *HTTPError
		want bool
	}{
		{&HTTPError{Op: "run", StatusCode: http.StatusConflict, Detail: "Sandbox team-a/x is suspended and does not resume on connect"}, true},
		{&HTTPError{Op: "run", StatusCode: http.StatusConflict, Detail: "Sandbox team-a/x is not ready"}, false},
		{&HTTPError{Op: "run", StatusCode: http.StatusConflict}, false},
		{&HTTPError{Op: "run", StatusCode: http.StatusNotFound, Detail: "Sandbox team-a/x is suspended"}, false},
		{&HTTPError{Op: "run", StatusCode: http.StatusServiceUnavailable, Detail: "Sandbox team-a/x is suspended"}, false},
	} {
		if got := errors.Is(tc.err, ErrSuspended); got != tc.want {
			t.Errorf("errors.Is(%v, ErrSuspended) = %v; want %v", tc.err, got, tc.want)
		}
		if errors.Is(tc.err, ErrNotFound) != (tc.err.StatusCode == http.StatusNotFound) {
			t.Errorf("%v: ErrNotFound matching changed", tc.err)
		}
	}
	wrapped := error(&HTTPError{Op: "run", StatusCode: http.StatusConflict, Detail: "Sandbox team-a/x is suspended"})
	if !errors.Is(errors.Join(errors.New("sandbox team-a/x"), wrapped), ErrSuspended) {
		t.Errorf("a wrapped suspended 409 does not match ErrSuspended")
	}
}

// A handle on a Sandbox with idle suspend reports its activity, at most
// once per interval (half the idle timeout); one without idle suspend,
// and one through a router (which reports for itself), report nothing.
func TestActivityReport(t *testing.T) {
	t.Run("idle-timeout", func(t *testing.T) {
		f := newFakeCluster(t, "sb-idle", map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "2s"}, false)
		sb := f.open(t)
		ctx := ctxFor(t)
		start := time.Now()
		runs := 0
		for time.Since(start) < 600*time.Millisecond {
			if res, err := sb.Run(ctx, "echo busy"); err != nil || res.Stdout != "busy\n" {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			runs++
			time.Sleep(50 * time.Millisecond)
		}
		eventually(t, "an activity report", func() bool {
			return len(f.patchesBy(sandboxv1beta1.FieldManagerActivity)) > 0
		})
		reports := f.patchesBy(sandboxv1beta1.FieldManagerActivity)
		// At most one per interval (1s): one at once, then one a tick later.
		if elapsed := time.Since(start); len(reports) > 1+int(elapsed/time.Second) {
			t.Errorf("%d activity reports for %d Runs in %v; want at most one per 1s interval", len(reports), runs, elapsed)
		}
		if len(reports) >= runs {
			t.Errorf("%d activity reports for %d Runs; want far fewer", len(reports), runs)
		}
		for _, p := range reports {
			if p.contentType != "application/apply-patch+yaml" || p.force != "true" {
				t.Errorf("activity PATCH content type %q force %q", p.contentType, p.force)
			}
			at, _ := p.annotations()[sandboxv1beta1.AnnotationLastActivity].(string)
			ts, err := time.Parse(time.RFC3339, at)
			// Stamped in whole seconds, rounded up; a report made while a
			// Run was in flight is a lease ahead of it.
			if err != nil || ts.Before(start.Truncate(time.Second)) || ts.After(time.Now().Add(resume.InFlightLease(time.Second)+time.Second)) {
				t.Errorf("activity PATCH last-activity %q (%v); want a time of the Runs (or a lease ahead), rounded up to the second", at, err)
			}
			if len(p.annotations()) != 1 || p.spec() != nil || p.meta()["uid"] != string(f.uid) {
				t.Errorf("activity PATCH %v; want the last-activity annotation alone, with the uid", p.body)
			}
		}
		if other := len(f.recordedPatches()) - len(reports); other != 0 {
			t.Errorf("%d PATCHes other than activity reports", other)
		}
	})

	t.Run("no-idle-timeout", func(t *testing.T) {
		f := newFakeCluster(t, "sb-busy", optedIn, false)
		sb := f.open(t)
		ctx := ctxFor(t)
		for range 5 {
			if _, err := sb.Run(ctx, "echo busy"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if p := f.recordedPatches(); len(p) != 0 {
			t.Errorf("%d PATCHes from a handle on a sandbox without idle suspend: %+v", len(p), p)
		}
	})

	t.Run("router", func(t *testing.T) {
		f := newFakeCluster(t, "sb-routed", map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "2s"}, false)
		_, router := newFakeRouter(t, f.rt)
		sb := f.open(t, WithRouter(router.URL), WithBearerToken("s3cret"))
		ctx := ctxFor(t)
		for range 5 {
			if _, err := sb.Run(ctx, "echo routed"); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if p := f.recordedPatches(); len(p) != 0 {
			t.Errorf("%d PATCHes from a handle through a router: %+v", len(p), p)
		}
		if n := f.executes(); n != 5 {
			t.Errorf("the runtime ran %d commands through the router; want 5", n)
		}
	})
}
