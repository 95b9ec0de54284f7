package router

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// resumeOptions gives the router resume on connect and activity reports as
// cfg's identity, with an event recorder, for the test's lifetime.
func resumeOptions(t *testing.T, cfg *rest.Config) (*resume.Writer, func(*router.Options)) {
	t.Helper()
	rc, err := resume.NewREST(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer := &resume.Writer{REST: rc}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); broadcaster.Shutdown() })
	scheme := runtime.NewScheme()
	if err := sandboxv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	recorder := broadcaster.NewRecorder(scheme, "sandbox-router")
	return writer, func(o *router.Options) {
		o.Resume, o.ResumeTimeout, o.Events = writer, 30*time.Second, recorder
	}
}

// suspend sets a Sandbox Suspended, as a user would (kubectl patch).
func suspend(t *testing.T, sb *sandboxv1beta1.Sandbox) {
	t.Helper()
	patch := []byte(`{"spec":{"operatingMode":"Suspended"}}`)
	if err := env.Client.Patch(ctxFor(t), sb, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func getSandbox(t *testing.T, ns, name string) *sandboxv1beta1.Sandbox {
	t.Helper()
	sb := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

// owns reports whether manager owns spec or metadata field f of sb by
// server-side apply.
func owns(sb *sandboxv1beta1.Sandbox, manager, f string) bool {
	for _, m := range sb.ManagedFields {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), f) {
			return true
		}
	}
	return false
}

// TestResumeOnConnect: a request for a Suspended Sandbox that opted in
// sets it Running (owned by agent-sandbox-operating-mode), waits while its
// Pod comes up (played here: no kubelet) and goes through; the router
// records a ResumedOnConnect event. A Sandbox that did not opt in stays
// Suspended and the answer says how to opt in. All with the deploy
// bundle's RBAC.
func TestResumeOnConnect(t *testing.T) {
	ns := env.Namespace(t)
	port := backend(t)
	sleepy := createSandbox(t, ns, "sleepy", nil, nil, map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"})
	suspend(t, sleepy)
	closed := createSandbox(t, ns, "closed", nil, nil, nil)
	suspend(t, closed)

	identity := routerIdentity(t, ns)
	_, withResume := resumeOptions(t, identity)
	url, reg := startRouter(t, identity, router.CacheOptions{}, withResume)
	headers := func(id string) map[string]string {
		return map[string]string{"X-Sandbox-ID": id, "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port}
	}

	code, body := call(t, url, headers("closed"))
	if code != http.StatusConflict || !strings.Contains(body, "is suspended and does not resume on connect") ||
		!strings.Contains(body, sandboxv1beta1.AnnotationResumeOnConnect+"=true") {
		t.Errorf("a Sandbox that did not opt in: %d %s", code, body)
	}
	if sb := getSandbox(t, ns, "closed"); sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended || owns(sb, sandboxv1beta1.FieldManagerOperatingMode, "f:operatingMode") {
		t.Errorf("a Sandbox that did not opt in was written: %s, managed fields %v", sb.Spec.OperatingMode, sb.ManagedFields)
	}

	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, 3)
	for range cap(answers) {
		go func() {
			code, body := call(t, url, headers("sleepy"))
			answers <- answer{code, body}
		}()
	}
	waitUntil(t, 20*time.Second, "the router sets the Sandbox Running", func() bool {
		return getSandbox(t, ns, "sleepy").Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeRunning
	})
	sb := getSandbox(t, ns, "sleepy")
	if !owns(sb, sandboxv1beta1.FieldManagerOperatingMode, "f:operatingMode") {
		t.Errorf("spec.operatingMode is not owned by %s: %v", sandboxv1beta1.FieldManagerOperatingMode, sb.ManagedFields)
	}
	// The controller would make the Pod; the kubelet would run it.
	createPod(t, sb, "sleepy", "127.0.0.1")
	for range cap(answers) {
		if a := <-answers; a.code != http.StatusOK || a.body != "sandbox saw /list/work auth=" {
			t.Errorf("a request that resumed the Sandbox: %d %s", a.code, a.body)
		}
	}
	if n := counter(t, reg, "sandbox_router_resumes_total", "result", "resumed"); n != 1 {
		t.Errorf("resumes counted: %v, want 1", n)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	var got []eventsv1.Event
	waitUntil(t, 20*time.Second, "the ResumedOnConnect event is recorded", func() bool {
		list, err := cs.EventsV1().Events(ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range list.Items {
			if e.Reason == router.EventResumedOnConnect {
				got = append(got, e)
			}
		}
		return len(got) > 0
	})
	e := got[0]
	if len(got) != 1 || e.Regarding.Name != "sleepy" || e.Regarding.UID != sleepy.UID || e.Regarding.Kind != "Sandbox" ||
		e.ReportingController != "sandbox-router" || !strings.HasPrefix(e.Note, "Resumed by a request through the sandbox router; Ready ") {
		t.Errorf("events: %+v", got)
	}
}

// TestActivityReports: requests to a Sandbox with idle suspend set its
// last-activity annotation (owned by agent-sandbox-activity), off the
// request path; the writes never touch a Sandbox deleted, nor its
// namesake.
func TestActivityReports(t *testing.T) {
	ns := env.Namespace(t)
	port := backend(t)
	busy := createSandbox(t, ns, "busy", nil, nil, map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1h"})
	createPod(t, busy, "busy", "127.0.0.1")
	identity := routerIdentity(t, ns)
	writer, withResume := resumeOptions(t, identity)
	reporter := router.NewActivityReporter(writer.ReportActivity, nil, testr.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reporter.Run(ctx, 50*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	url, _ := startRouter(t, identity, router.CacheOptions{}, func(o *router.Options) {
		withResume(o)
		o.Activity, o.ActivityInterval = reporter, time.Second
	})
	before := time.Now().Add(-time.Second)
	if code, body := call(t, url, map[string]string{"X-Sandbox-ID": "busy", "X-Sandbox-Namespace": ns, "X-Sandbox-Port": port}); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	waitUntil(t, 10*time.Second, "the last-activity annotation is written", func() bool {
		sb := getSandbox(t, ns, "busy")
		at, err := time.Parse(time.RFC3339, sb.Annotations[sandboxv1beta1.AnnotationLastActivity])
		return err == nil && !at.Before(before.Truncate(time.Second)) && owns(sb, sandboxv1beta1.FieldManagerActivity, "f:"+sandboxv1beta1.AnnotationLastActivity)
	})

	// Gone: the writes carry the UID, so neither a deleted Sandbox nor a
	// namesake made since is written, and the error says gone.
	gone := resume.Key{Namespace: ns, Name: "busy", UID: busy.UID}
	if err := env.Client.Delete(ctxFor(t), busy); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the Sandbox is gone", func() bool {
		err := env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(busy), &sandboxv1beta1.Sandbox{})
		return err != nil
	})
	for name, write := range map[string]func() error{
		"SetRunning":     func() error { return writer.SetRunning(ctxFor(t), gone) },
		"ReportActivity": func() error { return writer.ReportActivity(ctxFor(t), gone, time.Now()) },
	} {
		if err := write(); !resume.IsGone(err) {
			t.Errorf("%s on a deleted Sandbox: %v, want gone", name, err)
		}
		if err := env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(busy), &sandboxv1beta1.Sandbox{}); err == nil {
			t.Fatalf("%s on a deleted Sandbox made one", name)
		}
	}
	namesake := createSandbox(t, ns, "busy", nil, nil, nil)
	for name, write := range map[string]func() error{
		"SetRunning":     func() error { return writer.SetRunning(ctxFor(t), gone) },
		"ReportActivity": func() error { return writer.ReportActivity(ctxFor(t), gone, time.Now()) },
	} {
		if err := write(); !resume.IsGone(err) {
			t.Errorf("%s on a namesake: %v, want gone", name, err)
		}
	}
	if sb := getSandbox(t, ns, "busy"); sb.UID != namesake.UID || sb.Annotations[sandboxv1beta1.AnnotationLastActivity] != "" {
		t.Errorf("the namesake was written: %v", sb.Annotations)
	}
}
