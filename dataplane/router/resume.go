package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// SandboxWriter makes resume on connect's write: spec.operatingMode set to
// Running, with the Sandbox's UID as a precondition (resume.Writer).
type SandboxWriter interface {
	SetRunning(ctx context.Context, k resume.Key) error
}

// EventResumedOnConnect is the reason of the event on a Sandbox the router
// resumed.
const EventResumedOnConnect = "ResumedOnConnect"

// errResumeTimeout: a resume's own bound (ResumeTimeout) passed before the
// Sandbox was routable.
var errResumeTimeout = errors.New("the resume timed out")

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// awaitResume serves a request whose Sandbox opted in to resume on connect
// but is not routable (first says why): a Suspended one is resumed, once
// for all the requests that ask at the same time (resumeShared), and the
// request waits until the Sandbox is routable, up to ResumeTimeout and its
// own deadline.
func (h *Handler) awaitResume(ctx context.Context, t Target, first *Error, requestDeadline time.Time) (Endpoint, *Error) {
	name := t.Namespace + "/" + t.ID
	if h.o.Resume == nil {
		if first.Resume.Suspended {
			return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonSuspended,
				Detail: fmt.Sprintf("Sandbox %s is suspended, and this router does not resume sandboxes; resume it: kubectl patch sandbox NAME --type merge -p '{\"spec\":{\"operatingMode\":\"Running\"}}'.", name)}
		}
		first.Resume = nil // a plain refusal: the caller's resolve loop
		return Endpoint{}, first
	}
	h.o.Metrics.resumeWaited()
	// A resume is bounded by ResumeTimeout on its own (resume.Group); a
	// wait for a starting Sandbox by limit; both by the request's deadline.
	limit := time.Now().Add(h.o.ResumeTimeout)
	wctx, cancel := context.WithDeadline(ctx, requestDeadline)
	defer cancel()
	e := first
	changed := h.o.Changes.Wait()
	for {
		if e.Resume.Suspended {
			if rerr := h.resumeShared(wctx, t, e.Resume.Key); rerr != nil {
				return Endpoint{}, rerr
			}
		} else {
			left := time.Until(limit)
			if left <= 0 || wctx.Err() != nil {
				return Endpoint{}, &Error{Status: http.StatusGatewayTimeout, Reason: ReasonResumeTimeout,
					Detail: fmt.Sprintf("Timed out waiting for sandbox %s to become ready. %s", name, e.Detail)}
			}
			Pause(wctx, changed, min(left, resolvePoll))
		}
		changed = h.o.Changes.Wait()
		ep, err := h.o.Resolver.Resolve(wctx, t)
		if err == nil {
			ep.Resumed = true
			return ep, nil
		}
		if e = AsError(err); e.Resume == nil {
			return Endpoint{}, e // gone, replaced, a stale pod IP: nothing to wait for
		}
	}
}

// resumeShared resumes the Sandbox key names, or waits for the resume of
// it already under way, until it is routable; nil once it is.
func (h *Handler) resumeShared(ctx context.Context, t Target, key resume.Key) *Error {
	name := t.Namespace + "/" + t.ID
	// The shared wait is for the Sandbox, not for one caller's port or pod
	// IP: each caller resolves its own target afterwards.
	probe := Target{ID: t.ID, Namespace: t.Namespace, Port: t.Port, UID: key.UID, Timeout: t.Timeout, ClaimUID: t.ClaimUID, ResumeOnConnect: t.ResumeOnConnect}
	_, err := h.resumes.Do(ctx, key.String()+"/"+string(key.UID), func(rctx context.Context) error {
		return h.resumeOnce(rctx, probe, key)
	})
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.Is(err, errResumeTimeout):
		return &Error{Status: http.StatusGatewayTimeout, Reason: ReasonResumeTimeout,
			Detail: fmt.Sprintf("Sandbox %s was resumed but did not become ready within %s.", name, h.o.ResumeTimeout)}
	case ctx.Err() != nil: // this request's own bound (its timeout, or it went away)
		return &Error{Status: http.StatusGatewayTimeout, Reason: ReasonResumeTimeout,
			Detail: fmt.Sprintf("Timed out waiting for sandbox %s to resume.", name)}
	}
	return &Error{Status: http.StatusBadGateway, Reason: ReasonResumeFailed, Detail: fmt.Sprintf("Could not resume sandbox %s.", name)}
}

// resumeOnce is one resume: the write (unless the cache shows the Sandbox
// no longer Suspended: a resume that just ended), then the wait until
// probe is routable. Only the caller that made the write records the
// result and the event.
func (h *Handler) resumeOnce(ctx context.Context, probe Target, key resume.Key) error {
	log := h.o.Log.WithValues("sandbox", key.String(), "uid", key.UID)
	var wrote time.Time
	for {
		changed := h.o.Changes.Wait()
		_, err := h.o.Resolver.Resolve(ctx, probe)
		if err == nil {
			break
		}
		e := AsError(err)
		switch {
		case e.Resume == nil:
			if !wrote.IsZero() {
				h.o.Metrics.resumed(resumeError, 0)
				log.Info("resume on connect ended", "detail", e.Detail)
			}
			return e
		case e.Resume.Suspended && wrote.IsZero():
			if err := h.o.Resume.SetRunning(ctx, key); err != nil {
				h.o.Metrics.resumed(resumeError, 0)
				log.Error(err, "resume on connect failed")
				return writeError(probe, err)
			}
			wrote = time.Now()
			log.Info("resuming on connect")
		}
		if !Pause(ctx, changed, resolvePoll) {
			if !wrote.IsZero() {
				h.o.Metrics.resumed(resumeTimeout, 0)
				log.Info("resume on connect timed out", "after", time.Since(wrote).String())
			}
			return errResumeTimeout
		}
	}
	if wrote.IsZero() {
		return nil // resumed by someone else
	}
	took := time.Since(wrote)
	h.o.Metrics.resumed(resumeResumed, took.Seconds())
	log.Info("resumed on connect", "readyAfter", took.String())
	if h.o.Events != nil {
		regarding := &sandboxv1beta1.Sandbox{
			TypeMeta:   metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: key.UID},
		}
		h.o.Events.Eventf(regarding, nil, corev1.EventTypeNormal, EventResumedOnConnect, "Resume",
			"Resumed by a request through the sandbox router; Ready %s after the resume.", took.Round(time.Millisecond))
	}
	return nil
}

// writeError is the refusal for a failed resume write.
func writeError(t Target, err error) *Error {
	name := t.Namespace + "/" + t.ID
	switch {
	case apierrors.IsNotFound(err):
		return &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Detail: fmt.Sprintf("Sandbox %s not found.", name)}
	case resume.IsGone(err): // the UID precondition failed
		return &Error{Status: http.StatusConflict, Reason: ReasonUIDMismatch,
			Detail: fmt.Sprintf("Sandbox %s was deleted, or replaced by another of the same name; it was not resumed.", name)}
	case apierrors.IsForbidden(err):
		return &Error{Status: http.StatusBadGateway, Reason: ReasonResumeFailed,
			Detail: fmt.Sprintf("Could not resume sandbox %s: the router may not patch sandboxes.", name)}
	}
	return &Error{Status: http.StatusBadGateway, Reason: ReasonResumeFailed,
		Detail: fmt.Sprintf("Could not resume sandbox %s (%s).", name, apierrors.ReasonForError(err))}
}

// NewActivityReporter returns the reporter of Options.Activity: write is
// resume.Writer.ReportActivity; results are counted in m and failures
// logged. Run it (Reporter.Run) for as long as the handler serves.
func NewActivityReporter(write func(context.Context, resume.Key, time.Time) error, m *Metrics, log logr.Logger) *resume.Reporter {
	return &resume.Reporter{
		Write: func(ctx context.Context, k resume.Key, at time.Time) error {
			err := write(ctx, k, at)
			switch {
			case err == nil:
				m.activityWrite("ok")
			case resume.IsGone(err):
				m.activityWrite("gone")
			default:
				m.activityWrite("error")
			}
			return err
		},
		Gone:    resume.IsGone,
		OnError: func(k resume.Key, err error) { log.Error(err, "reporting activity", "sandbox", k.String()) },
	}
}
